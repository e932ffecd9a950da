package rst

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// PipelineConfig configures the agent's RST pipeline.
type PipelineConfig struct {
	Probe    Prober   // OpenProbe's; required
	Services Services // nil: resets are attributed to pods, not services
	// Window is how long a deleted pod's addresses stay watched (--rst-window).
	Window time.Duration
	// EventsPerSecond is the probe's per-CPU event rate limit, reported with
	// the samples (default 100, the probe's default).
	EventsPerSecond int
	MaxSamples      int                        // event samples kept (default DefaultMaxSamples)
	Clock           clock.WithDelayedExecution // default: the real clock
	Log             *slog.Logger               // default: discard
}

// Pipeline is the agent's one RST pipeline. Pod deliveries of the watch
// (OnPod) decide which addresses the probe watches; the kernel's per-CPU
// counters of those addresses, attributed to pods and services, are the one
// source of every count (Snapshot feeds /metrics, /v1/rsts and the
// per-service view alike); the ring buffer's rate-limited events are kept as
// attributed samples (Run).
type Pipeline struct {
	cfg PipelineConfig

	mu       sync.Mutex
	list     *watchList
	tracker  *Tracker
	samples  sampleRing
	stats    Stats
	timer    clock.Timer
	armedFor time.Time // the expiry the timer is armed for
	closed   bool
}

// NewPipeline returns a pipeline over cfg.Probe; call Run to take samples.
func NewPipeline(cfg PipelineConfig) *Pipeline {
	if cfg.EventsPerSecond <= 0 {
		cfg.EventsPerSecond = 100
	}
	if cfg.MaxSamples <= 0 {
		cfg.MaxSamples = DefaultMaxSamples
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{cfg: cfg, list: newWatchList(cfg.Window),
		tracker: NewTracker(), samples: sampleRing{max: cfg.MaxSamples}}
}

// Status is the probe's.
func (p *Pipeline) Status() Status { return p.cfg.Probe.Status() }

// OnPod folds in one delivery of a pod of this node. It is called from the
// watch's event callback and does not block beyond a few bpf map updates:
// a terminating pod's addresses are watched as its deletion is delivered.
func (p *Pipeline) OnPod(c PodChange) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	start, stop := p.list.apply(c)
	p.stopLocked(stop)
	p.startLocked(start, c.At)
	if len(start) > 0 {
		p.resolveLocked()
	}
	p.armLocked()
	p.mu.Unlock()
}

func (p *Pipeline) startLocked(start []netip.Addr, at time.Time) {
	for _, ip := range start {
		if err := p.cfg.Probe.Watch(ip); err != nil {
			p.cfg.Log.Warn("rst probe: cannot watch", "ip", ip, "err", err)
			p.list.forget(ip)
			continue
		}
		tg := p.list.entries[ip].Target
		p.cfg.Log.Debug("rst probe: watching a terminating pod", "ip", ip, "pod", tg.Namespace+"/"+tg.Pod,
			"since_deletion", at.Sub(tg.Deleted))
	}
}

// stopLocked unwatches addresses, attributing every reset they counted to
// what they stood for: counts are read before the unwatch and the final
// counts (which Unwatch reads) right after.
func (p *Pipeline) stopLocked(stop map[netip.Addr]Target) {
	if len(stop) == 0 {
		return
	}
	p.resolveStoppedLocked(stop)
	p.refreshLocked(stop)
	for ip := range stop {
		if err := p.cfg.Probe.Unwatch(ip); err != nil {
			p.cfg.Log.Warn("rst probe: cannot unwatch", "ip", ip, "err", err)
		}
	}
	p.refreshLocked(stop)
}

// refreshLocked reads the kernel's counters and attributes their increase to
// the watched addresses' targets (extra overrides them: addresses being
// unwatched).
func (p *Pipeline) refreshLocked(extra map[netip.Addr]Target) {
	tbl := p.list.table()
	if len(extra) > 0 {
		t := Table{Addrs: make(map[netip.Addr]Target, len(tbl.Addrs)+len(extra))}
		for ip, tg := range tbl.Addrs {
			t.Addrs[ip] = tg
		}
		for ip, tg := range extra {
			t.Addrs[ip] = tg
		}
		tbl = t
	}
	counts, err := p.cfg.Probe.Counts()
	if err != nil {
		p.cfg.Log.Warn("rst probe: cannot read counters", "err", err)
		return
	}
	p.tracker.Observe(counts, tbl)
	if st, err := p.cfg.Probe.Stats(); err == nil {
		p.stats = st
	}
}

// armLocked arms the timer for the next expiry of a deleted pod's addresses.
func (p *Pipeline) armLocked() {
	next := p.list.nextExpiry()
	if next.Equal(p.armedFor) {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.armedFor = next
	if !next.IsZero() {
		// Not in the timer's callback: a fake clock runs it with its lock held.
		p.timer = p.cfg.Clock.AfterFunc(next.Sub(p.cfg.Clock.Now()), func() { go p.expire(next) })
	}
}

// expire unwatches the addresses due at the expiry the timer was armed for.
func (p *Pipeline) expire(due time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if p.armedFor.Equal(due) {
		p.armedFor = time.Time{}
	}
	p.stopLocked(p.list.expire(due))
	p.armLocked()
}

// Run keeps the probe's event samples, attributed, until ctx ends.
func (p *Pipeline) Run(ctx context.Context) {
	events := p.cfg.Probe.Events(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			p.mu.Lock()
			p.samples.add(Attribute(ev, p.list.table())...)
			p.mu.Unlock()
		}
	}
}

// resolveLocked attributes the watched addresses to the services they are
// endpoints of. Services is asked with the lock held: it must not call the
// pipeline.
func (p *Pipeline) resolveLocked() {
	if p.cfg.Services == nil || len(p.list.entries) == 0 {
		return
	}
	for ip, svc := range p.cfg.Services.ServicesOf(p.list.namespaces()) {
		p.list.setService(ip, svc)
	}
}

// resolveStoppedLocked attributes addresses being unwatched that have no
// service yet.
func (p *Pipeline) resolveStoppedLocked(stop map[netip.Addr]Target) {
	if p.cfg.Services == nil {
		return
	}
	ns := map[netip.Addr]string{}
	for ip, tg := range stop {
		if tg.Service == "" {
			ns[ip] = tg.Namespace
		}
	}
	if len(ns) == 0 {
		return
	}
	for ip, svc := range p.cfg.Services.ServicesOf(ns) {
		tg := stop[ip]
		tg.Service = svc
		stop[ip] = tg
	}
}

// Close stops the pipeline and closes the probe.
func (p *Pipeline) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	if c, ok := p.cfg.Probe.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
