package datapath

import (
	"context"
	"sync"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// Redetect is the reader used when --datapath=auto found no kube-proxy state
// at start (typically: the agent started before kube-proxy's first sync on a
// booting node). It reports mode none and retries detection at most every
// Interval until a mode appears; then it reads that mode for good.
type Redetect struct {
	NetNS    string
	Interval time.Duration
	Now      func() time.Time // the agent's clock
	// Detect finds the mode (DetectMode when nil).
	Detect func(ctx context.Context, netns string) (string, string, error)

	mu     sync.Mutex
	inner  Reader
	hints  model.Hints
	reason string
	last   time.Time
}

// NewRedetect starts from the reason the first detection gave.
func NewRedetect(netns string, interval time.Duration, now func() time.Time, reason string) *Redetect {
	return &Redetect{NetNS: netns, Interval: interval, Now: now, reason: reason, last: now()}
}

// Name is the detected mode, or model.ModeNone.
func (r *Redetect) Name() string {
	if in := r.current(); in != nil {
		return in.Name()
	}
	return model.ModeNone
}

// Fallback is the detected reader's (FallbackReporter), if it has one.
func (r *Redetect) Fallback() (from, to, reason string, since time.Time) {
	if fr, ok := r.current().(FallbackReporter); ok {
		return fr.Fallback()
	}
	return "", "", "", time.Time{}
}

func (r *Redetect) current() Reader {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inner
}

// Snapshot detects again when due, then reads the mode found, if any.
func (r *Redetect) Snapshot(ctx context.Context) (model.Observed, error) {
	r.mu.Lock()
	if r.inner == nil && r.Now().Sub(r.last) >= r.Interval {
		r.detectLocked(ctx)
	}
	inner, reason := r.inner, r.reason
	r.mu.Unlock()
	if inner == nil {
		return model.Observed{Datapath: model.ModeNone, Warnings: []string{reason}}, nil
	}
	return inner.Snapshot(ctx)
}

func (r *Redetect) detectLocked(ctx context.Context) {
	r.last = r.Now()
	detect := r.Detect
	if detect == nil {
		detect = DetectMode
	}
	mode, reason, err := detect(ctx, r.NetNS)
	switch {
	case err != nil:
		r.reason = "datapath detection failed: " + err.Error()
	case mode == model.ModeNone:
		r.reason = reason
	default:
		src, err := Open(mode, r.NetNS)
		if err != nil {
			r.reason = err.Error()
			return
		}
		src.SetHints(r.hints)
		r.inner = src
	}
}

// SetHints keeps the hints for the reader to come, or hands them on.
func (r *Redetect) SetHints(h model.Hints) {
	r.mu.Lock()
	r.hints = h
	inner := r.inner
	r.mu.Unlock()
	if inner != nil {
		inner.SetHints(h)
	}
}

// ApplyChange forwards change events once a mode is known.
func (r *Redetect) ApplyChange(ctx context.Context, ev ChangeEvent) error {
	if in := r.current(); in != nil {
		return in.ApplyChange(ctx, ev)
	}
	return nil
}

// Evented forwards once a mode is known.
func (r *Redetect) Evented() bool {
	if in := r.current(); in != nil {
		return in.Evented()
	}
	return false
}

// RequestAudit forwards once a mode is known: to the reader's RequestAudit,
// or its Resync when it has none.
func (r *Redetect) RequestAudit() {
	switch in := r.current().(type) {
	case nil:
	case AuditRequester:
		in.RequestAudit()
	default:
		in.Resync()
	}
}

// Resync forwards once a mode is known.
func (r *Redetect) Resync() {
	if in := r.current(); in != nil {
		in.Resync()
	}
}

// Frozen forwards once a mode is known and its reader shares its frontends.
func (r *Redetect) Frozen() (model.Observed, bool) {
	if in, ok := r.current().(Freezer); ok {
		return in.Frozen()
	}
	return model.Observed{}, false
}

// SelfAudits forwards once a mode is known and its reader audits itself.
func (r *Redetect) SelfAudits() (audits, differed, deferred uint64) {
	if in, ok := r.current().(SelfAuditor); ok {
		return in.SelfAudits()
	}
	return 0, 0, 0
}

// LastReadCPU forwards the read cost once a mode is known.
func (r *Redetect) LastReadCPU() time.Duration {
	if in := r.current(); in != nil {
		return in.LastReadCPU()
	}
	return 0
}
