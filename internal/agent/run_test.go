package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/model"
)

// recordingSource logs, in order, the change events applied and the reads.
type recordingSource struct {
	fakeSource
	logMu sync.Mutex
	log   []string
}

func (r *recordingSource) note(s string) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.log = append(r.log, s)
}

func (r *recordingSource) calls() []string {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return slices.Clone(r.log)
}

func (r *recordingSource) ApplyChange(_ context.Context, ev datapath.ChangeEvent) error {
	r.note(fmt.Sprintf("apply %d", ev.Generation))
	return nil
}

func (r *recordingSource) Snapshot(ctx context.Context) (model.Observed, error) {
	r.note("read")
	return r.fakeSource.Snapshot(ctx)
}

func (r *recordingSource) Evented() bool { return true }

// TestRunReadsAfterEachChangeEvent: two change events queued together (in
// iptables-nft mode a sync commits filter, then nat) are read one at a time.
// A read after both would date the state it finds, and so a change the
// second programmed, by the first one's arrival (the earliest event since
// the last read): early by the gap between the commits.
func TestRunReadsAfterEachChangeEvent(t *testing.T) {
	clk := clocktesting.NewFakeClock(start)
	src := &recordingSource{}
	src.set(model.Observed{Datapath: model.ModeIPTables, Frontends: map[model.Frontend]model.Verdict{}}, nil)
	changes := make(chan datapath.ChangeEvent, 2)
	changes <- datapath.ChangeEvent{Generation: 1, Received: start}
	changes <- datapath.ChangeEvent{Generation: 2, Received: start.Add(30 * time.Millisecond)}
	cfg := DefaultConfig()
	cfg.NodeName = node
	a := New(Options{Config: cfg, Clock: clk, Cluster: newFakeCluster(), Datapath: src, Mode: model.ModeIPTables,
		Changes: changes})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		log := src.calls()
		if i := slices.Index(log, "apply 2"); i >= 0 && slices.Contains(log[i:], "read") {
			j := slices.Index(log, "apply 1")
			if j < 0 || !slices.Contains(log[j:i], "read") {
				t.Fatalf("calls %q: no read between the two change events", log)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls %q: both events not applied and read within 5 s", log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
