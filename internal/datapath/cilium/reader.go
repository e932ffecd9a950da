package cilium

import (
	"context"
	"sync"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// Config says where the maps are.
type Config struct {
	// BPFFS is the bpf filesystem cilium-agent pins into ("" = the first
	// bpf mount of this process's mount namespace, as Cilium's tools find it).
	BPFFS string
}

// Reader reads Cilium's load-balancer maps into the observed model. It
// keeps nothing between reads but the hints: every Snapshot is a full read,
// which costs in-process map iteration only.
type Reader struct {
	Config Config

	mu    sync.Mutex
	hints model.Hints
	bpffs string // Config.BPFFS, or the first bpf mount once found
}

// Name is the datapath mode.
func (r *Reader) Name() string { return model.ModeCilium }

// SetHints takes the service ports of the API's frontends: the maps know a
// frontend's reverse-NAT id, not its Service's name.
func (r *Reader) SetHints(h model.Hints) {
	r.mu.Lock()
	r.hints = h
	r.mu.Unlock()
}

// Snapshot reads the maps of both families.
func (r *Reader) Snapshot(ctx context.Context) (model.Observed, error) {
	if err := ctx.Err(); err != nil {
		return model.Observed{}, err
	}
	fs, err := r.fs()
	if err != nil {
		return model.Observed{}, err
	}
	t, err := readTables(fs)
	if err != nil {
		return model.Observed{}, err
	}
	r.mu.Lock()
	h := r.hints
	r.mu.Unlock()
	obs := observe(t.services, t.backends, h)
	if len(t.families) == 1 {
		obs.Warnings = append(obs.Warnings, "only "+t.families[0]+" service maps are pinned: the other family is not compared")
	}
	return obs, nil
}

// fs is the bpffs to read: the configured one, else the first bpf mount,
// looked up in mountinfo until found, not on every read.
func (r *Reader) fs() (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bpffs == "" {
		r.bpffs = r.Config.BPFFS
	}
	if r.bpffs == "" {
		fs, err := BPFFSFromSystem()
		if err != nil {
			return "", err
		}
		r.bpffs = fs
	}
	return r.bpffs, nil
}

// LastReadCPU: reads are in process; callers use wall time.
func (r *Reader) LastReadCPU() time.Duration { return 0 }

// Resync: every Snapshot reads everything already.
func (r *Reader) Resync() {}
