package cilium

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"github.com/netdrift/netdrift/internal/model"
)

// Config says where the maps are.
type Config struct {
	// BPFFS is the bpf filesystem cilium-agent pins into ("" = the first
	// bpf mount of this process's mount namespace, as Cilium's tools find it).
	BPFFS string
	// WriteStamp, unless "" or StampOff, dates the state a read finds by
	// the kernel's stamp of the last write to the maps (bpf/mapstamp.c)
	// instead of by the read: the agent sets it, one-shot reads do not.
	// When the stamp cannot attach, reads are dated by themselves and
	// Fallback says why.
	WriteStamp StampMode
}

// Reader reads Cilium's load-balancer maps into the observed model. Every
// Snapshot is a full read (in-process map iteration), unless the write
// stamp is attached and counted no write to the maps since the last one.
type Reader struct {
	Config Config

	mu    sync.Mutex
	hints model.Hints
	bpffs string // Config.BPFFS, or the first bpf mount once found

	read     sync.Mutex  // one Snapshot at a time: it sets the stamp's watched maps
	stamp    *writeStamp // nil: not attached (yet, or it failed: stampErr)
	stampErr error
	stampAt  time.Time // when it failed, or attached on the tracepoints
	tpReason error     // why fexit was refused, while the tracepoint mode is attached

	// The last full read, handed out again (same Version) while the stamp
	// counted no write to the same maps since and neither new hints nor a
	// Resync asked for a read: polling then costs opening the pins.
	last       model.Observed
	lastWrites uint64 // the stamp's write count before its dump
	lastOK     bool   // last may be handed out again
	version    uint64
	stale      bool // hints changed or Resync called since the last full read
}

// Name is the datapath mode.
func (r *Reader) Name() string { return model.ModeCilium }

// SetHints takes the service ports of the API's frontends: the maps know a
// frontend's reverse-NAT id, not its Service's name.
func (r *Reader) SetHints(h model.Hints) {
	r.mu.Lock()
	r.hints, r.stale = h, true
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
	r.read.Lock()
	defer r.read.Unlock()
	sr := stampedRead{r: r, st: r.writeStamp()}
	t, err := readTables(fs, sr.opened)
	if err != nil {
		return model.Observed{}, err
	}
	if t.skipped {
		obs := r.last
		obs.HeldSince, _ = sr.st.heldSince()
		return obs, nil
	}
	r.mu.Lock()
	h := r.hints
	r.stale = false
	r.mu.Unlock()
	obs := observe(t.services, t.backends, h)
	if len(t.families) == 1 {
		obs.Warnings = append(obs.Warnings, "only "+t.families[0]+" service maps are pinned: the other family is not compared")
	}
	r.version++
	obs.Version = r.version
	r.last, r.lastWrites, r.lastOK = obs, sr.writes, sr.st != nil
	if sr.st != nil && !sr.watchedNew {
		// Read after the dump: a write the dump raced is counted, so the
		// state read held since this time or earlier.
		obs.HeldSince, _ = sr.st.heldSince()
	}
	return obs, nil
}

// stampedRead is one Snapshot's use of the write stamp (st nil: none).
type stampedRead struct {
	r          *Reader
	st         *writeStamp
	writes     uint64 // the stamp's write count before the dump
	watchedNew bool   // the watched maps changed: writes before were not counted
}

// opened watches the maps a read opened and reports whether the last full
// read may stand for this one (nothing to read). The count is taken before
// the dump: a write the dump races makes the next read a full one.
func (sr *stampedRead) opened(ms []*ebpf.Map) (bool, error) {
	if sr.st == nil {
		return false, nil
	}
	changed, err := sr.st.watch(ms)
	if err == nil {
		_, sr.writes, err = sr.st.last()
	}
	if err != nil {
		sr.r.stampFailed(fmt.Errorf("watch the maps' writes: %w", err))
		sr.st = nil
		return false, nil
	}
	sr.watchedNew = changed
	return !changed && sr.r.reusable(sr.writes), nil
}

// reusable reports whether the last full read may stand for this one:
// the stamp has counted the same number of writes (writes) as it had before that read's dump.
func (r *Reader) reusable(writes uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastOK && !r.stale && writes == r.lastWrites
}

// writeStamp is the attached stamp, attaching it on first use when
// Config.WriteStamp asks for it; nil when it is not attached. Called
// under r.read.
func (r *Reader) writeStamp() *writeStamp {
	if r.Config.WriteStamp == "" || r.Config.WriteStamp == StampOff || r.stamp != nil {
		return r.stamp
	}
	r.mu.Lock()
	failed := r.stampErr != nil
	r.mu.Unlock()
	if failed {
		return nil
	}
	s, err := attachWriteStamp(r.Config.WriteStamp)
	if err != nil {
		r.stampFailed(err)
		return nil
	}
	r.stamp = s
	if s.fexit != nil {
		r.mu.Lock()
		r.tpReason, r.stampAt = s.fexit, time.Now()
		r.mu.Unlock()
	}
	return s
}

// stampFailed drops the stamp for good: reads date the state from now on.
func (r *Reader) stampFailed(err error) {
	if r.stamp != nil {
		r.stamp.close()
		r.stamp = nil
	}
	r.mu.Lock()
	r.stampErr, r.stampAt = err, time.Now()
	r.mu.Unlock()
}

// Fallback reports that changes are dated by the reads, not by the kernel's
// stamp of the maps' writes, when Config.WriteStamp asked for the stamp and
// it could not attach; or that the stamp runs on the system-call
// tracepoints, a cost to every system call of the node, because the kernel
// refused fexit ("" when neither).
func (r *Reader) Fallback() (from, to, reason string, since time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.stampErr != nil:
		return "kernel time", "read time", "map writes are not stamped (" + r.stampErr.Error() +
			"): lag samples are dated by the read that saw the change, up to a fast-poll interval late", r.stampAt
	case r.tpReason != nil:
		return "fexit", "system-call tracepoints", "the kernel refused fexit on the hash map's functions (" + r.tpReason.Error() +
			"): map writes are stamped by programs on the system-call tracepoints, which every system call of the node " +
			"pays for (--cilium-write-stamp=auto; fexit or off avoid that cost)", r.stampAt
	}
	return "", "", "", time.Time{}
}

// Close detaches the write stamp, if attached.
func (r *Reader) Close() error {
	r.read.Lock()
	defer r.read.Unlock()
	if r.stamp != nil {
		r.stamp.close()
		r.stamp = nil
	}
	return nil
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

// Resync makes the next Snapshot a full read, also when the stamp counted
// no write since the last one.
func (r *Reader) Resync() {
	r.mu.Lock()
	r.stale = true
	r.mu.Unlock()
}
