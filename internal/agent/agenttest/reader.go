package agenttest

import (
	"context"
	"time"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/model"
)

// Reader makes a datapath.Reader of a test source that only snapshots: it
// takes no hints, ignores change events and reports no read cost.
func Reader(src datapath.Source) datapath.Reader { return snapshotOnly{src} }

type snapshotOnly struct{ datapath.Source }

func (snapshotOnly) SetHints(model.Hints)                                    {}
func (snapshotOnly) ApplyChange(context.Context, datapath.ChangeEvent) error { return nil }
func (snapshotOnly) LastReadCPU() time.Duration                              { return 0 }
func (snapshotOnly) Resync()                                                 {}
func (snapshotOnly) Evented() bool                                           { return false }
