// Package datapath reads what the kernel holds: kube-proxy's iptables and
// nftables rules, routes, links and conntrack. Every source is split into a
// fetch step (syscall or exec, no logic) and a pure parse step.
// The agent never writes to the datapath: nothing here changes kernel state.
package datapath

import (
	"context"
	"errors"

	"github.com/netdrift/netdrift/internal/model"
)

// Source reads one kind of kube-proxy state into the observed model.
type Source interface {
	// Name is the datapath mode: model.ModeIPTables, ModeNFTables or ModeIPVS.
	Name() string
	// Snapshot fetches and parses the current state. It never modifies it.
	Snapshot(ctx context.Context) (model.Observed, error)
}

// ErrUnsupported marks a source the node cannot provide (missing tool or
// kernel feature). Wrap it with the reason: fmt.Errorf("%w: no nft binary", ErrUnsupported).
var ErrUnsupported = errors.New("unsupported")
