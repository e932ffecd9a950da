package rst

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultSettle is how long a live reset waits for a deletion request that
// would make it a terminating pod's before it counts as ready / not ready.
const DefaultSettle = 15 * time.Second

// PipelineConfig configures the agent's RST pipeline.
type PipelineConfig struct {
	Probe    Prober   // OpenProbe's; required
	Services Services // nil: resets are attributed to pods, not services
	// Deletions says when a pod's deletion was requested: the node's one
	// registry (deletions.Registry), which the agent records each delivery
	// into before OnPod sees it. nil: no deletion request is known, a pod's
	// addresses count as terminating from when it left the API.
	Deletions Deletions
	// Window is how long a deleted pod's addresses stay watched (--rst-window).
	Window time.Duration
	// Settle is how long a reset sent before any known deletion request of
	// its pod waits for one (the watch's delivery delay) before it is
	// counted as ready / not ready (default DefaultSettle).
	Settle time.Duration
	// EventsPerSecond is the probe's per-CPU event rate limit, reported with
	// the samples (default 100, the probe's default).
	EventsPerSecond int
	MaxSamples      int                        // event samples kept (default DefaultMaxSamples)
	Clock           clock.WithDelayedExecution // default: the real clock
	// Mono is the probe's kernel clock in ns (default MonoNow); with Clock
	// it maps the API's times to the kernel's.
	Mono func() uint64
	// Drain is how often Run reads the counters, which drains the kernel's
	// settled buckets (default 1 s).
	Drain time.Duration
	Log   *slog.Logger // default: discard
}

// Pipeline is the agent's one RST pipeline. Pod deliveries of the watch
// (OnPod) decide which addresses the probe watches — every pod address of
// the node, with its deletion request and removal times in kernel time; the
// kernel's per-CPU counters of those addresses, classified by state and
// attributed to pods and services (ledger), are the one source of every
// count (Snapshot feeds /metrics, /v1/rsts and the per-service view alike);
// the ring buffer's rate-limited events are kept as attributed samples (Run).
type Pipeline struct {
	cfg PipelineConfig

	mu       sync.Mutex
	list     *watchList
	ledger   *ledger
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
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	if cfg.Drain <= 0 {
		cfg.Drain = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Mono == nil {
		cfg.Mono = MonoNow
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{cfg: cfg, list: newWatchList(cfg.Window, cfg.Deletions), ledger: newLedger(),
		samples: sampleRing{max: cfg.MaxSamples}}
}

// Status is the probe's.
func (p *Pipeline) Status() Status { return p.cfg.Probe.Status() }

// OnPod folds in one delivery of a pod of this node. It is called from the
// watch's event callback and does not block beyond a few bpf map updates: a
// pod's addresses are watched from its first delivery, and its deletion
// request is written into the probe's map as it is delivered.
func (p *Pipeline) OnPod(c PodChange) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	set, stop := p.list.apply(c)
	p.stopLocked(stop) // addresses another pod took over
	p.setLocked(set, c.At)
	if len(set) > 0 {
		p.resolveLocked()
	}
	p.armLocked()
	p.mu.Unlock()
}

// mono maps an agent clock time to the kernel's clock (0 for zero).
func (p *Pipeline) mono(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	m := int64(p.cfg.Mono()) - int64(p.cfg.Clock.Since(t))
	if m < 1 {
		m = 1
	}
	return uint64(m)
}

// setLocked writes the addresses' entries (state times) into the probe.
func (p *Pipeline) setLocked(set []netip.Addr, at time.Time) {
	for _, ip := range set {
		e := p.list.entries[ip]
		if err := p.cfg.Probe.WatchEndpoint(ip, WatchState{TermNs: p.mono(e.Deleted), GoneNs: p.mono(e.gone)}); err != nil {
			p.cfg.Log.Warn("rst probe: cannot watch", "ip", ip, "err", err)
			p.list.forget(ip)
			continue
		}
		if !e.Deleted.IsZero() {
			p.cfg.Log.Debug("rst probe: pod terminating", "ip", ip, "pod", e.Namespace+"/"+e.Pod,
				"since_deletion", at.Sub(e.Deleted))
		}
	}
}

// stopLocked unwatches addresses, attributing every reset they counted to
// what they stood for: counts are read before the unwatch and the final
// counts (which Unwatch reads) right after; their pending live resets are
// settled at once.
func (p *Pipeline) stopLocked(stop map[netip.Addr]watchEntry) {
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
	p.ledger.settle(p.cfg.Mono(), p.cfg.Settle, p.mono, p.info(stop), stop)
}

// info looks an address up in the watch list, extra first.
func (p *Pipeline) info(extra map[netip.Addr]watchEntry) func(netip.Addr) (watchEntry, bool) {
	return func(a netip.Addr) (watchEntry, bool) {
		if e, ok := extra[a]; ok {
			return e, true
		}
		e, ok := p.list.entries[a]
		return e, ok
	}
}

// refreshLocked reads the kernel's counters into the ledger and settles
// what can be (extra: addresses being unwatched).
func (p *Pipeline) refreshLocked(extra map[netip.Addr]watchEntry) {
	counts, err := p.cfg.Probe.Counters()
	if err != nil {
		p.cfg.Log.Warn("rst probe: cannot read counters", "err", err)
		return
	}
	info := p.info(extra)
	p.ledger.observe(counts, info)
	p.ledger.settle(p.cfg.Mono(), p.cfg.Settle, p.mono, info, nil)
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

// Run keeps the probe's event samples, attributed, and every Drain writes
// new endpoint ports into the probe and reads the counters (which keeps the
// kernel's live buckets few), until ctx ends.
func (p *Pipeline) Run(ctx context.Context) {
	events := p.cfg.Probe.Events(ctx)
	tick := p.cfg.Clock.NewTimer(p.cfg.Drain)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			tick.Reset(p.cfg.Drain)
			p.mu.Lock()
			if !p.closed {
				p.resolveLocked() // new endpoint ports within a Drain
				p.refreshLocked(nil)
			}
			p.mu.Unlock()
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

// resolveLocked attributes the watched addresses to the service endpoints
// they are, and writes their endpoint ports into the probe. Services is
// asked with the lock held: it must not call the pipeline.
func (p *Pipeline) resolveLocked() {
	if p.cfg.Services == nil || len(p.list.entries) == 0 {
		return
	}
	for ip, refs := range p.cfg.Services.EndpointsOf(p.list.namespaces()) {
		if !p.list.setEndpoints(ip, refs) {
			continue
		}
		ports := make([]uint16, 0, len(refs))
		for port := range p.list.entries[ip].ports {
			ports = append(ports, port)
		}
		slices.Sort(ports)
		if err := p.cfg.Probe.SetPorts(ip, ports); err != nil {
			p.cfg.Log.Warn("rst probe: cannot set endpoint ports", "ip", ip, "err", err)
		}
	}
}

// resolveStoppedLocked attributes addresses being unwatched that have no
// service yet.
func (p *Pipeline) resolveStoppedLocked(stop map[netip.Addr]watchEntry) {
	if p.cfg.Services == nil {
		return
	}
	ns := map[netip.Addr]string{}
	for ip, e := range stop {
		if e.Service.IsZero() {
			ns[ip] = e.Namespace
		}
	}
	if len(ns) == 0 {
		return
	}
	for ip, refs := range p.cfg.Services.EndpointsOf(ns) {
		e := stop[ip]
		if e.ports == nil {
			e.ports = map[uint16]EndpointRef{}
		}
		for port, r := range refs {
			e.ports[port] = r
		}
		e.Service = primaryService(e.ports)
		stop[ip] = e
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
