package main

import (
	"context"
	"sync"
	"time"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/model"
)

// redetectSource is used when --datapath=auto found no kube-proxy state at
// start (typically: the agent started before kube-proxy's first sync on a
// booting node). It reports mode none, and retries detection at most every
// interval until a mode appears; then it reads that mode for good.
type redetectSource struct {
	netns    string
	known    func() model.Desired
	interval time.Duration
	detect   func(ctx context.Context, netns string) (string, string, error)

	mu     sync.Mutex
	inner  *knownSource
	reason string
	last   time.Time
}

func (r *redetectSource) Name() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inner != nil {
		return r.inner.Name()
	}
	return model.ModeNone
}

func (r *redetectSource) Snapshot(ctx context.Context) (model.Observed, error) {
	r.mu.Lock()
	if r.inner == nil && time.Since(r.last) >= r.interval {
		r.last = time.Now()
		mode, reason, err := r.detect(ctx, r.netns)
		switch {
		case err != nil:
			r.reason = "datapath detection failed: " + err.Error()
		case mode == model.ModeNone:
			r.reason = reason
		default:
			if src, err := newSource(mode, r.netns, r.known); err == nil {
				r.inner = src
			}
		}
	}
	inner, reason := r.inner, r.reason
	r.mu.Unlock()
	if inner == nil {
		return model.Observed{Datapath: model.ModeNone, Warnings: []string{reason}}, nil
	}
	return inner.Snapshot(ctx)
}

// ApplyChange forwards change events once a mode is known.
func (r *redetectSource) ApplyChange(ctx context.Context, ev datapath.ChangeEvent) {
	r.mu.Lock()
	inner := r.inner
	r.mu.Unlock()
	if inner != nil {
		inner.ApplyChange(ctx, ev)
	}
}

// LastReadCPU forwards the read cost once a mode is known.
func (r *redetectSource) LastReadCPU() time.Duration {
	r.mu.Lock()
	inner := r.inner
	r.mu.Unlock()
	if inner == nil {
		return 0
	}
	return inner.LastReadCPU()
}
