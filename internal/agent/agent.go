package agent

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/deletions"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

// FindingSource adds findings beyond the service datapath (routes, links,
// conntrack, cluster-scope checks): a node source, run in the background on
// its own cadence (nodeRuns), its findings folded into the next audit. On a
// partial failure it returns what it could check together with the error:
// the source is reported down and its findings are kept. desired returns the
// node's desired state, frozen (a copy of every frontend the first time it
// is called after a change): a source calls it only when it needs it.
type FindingSource interface {
	Name() string
	Findings(ctx context.Context, cs *watch.ClusterState, desired func() model.Desired) ([]model.Finding, error)
}

// Agent is the audit loop. Create with New, feed watch events to OnEvent,
// and call Run.
type Agent struct {
	// Set by New and never changed: read without the lock.
	cfg         Config
	clock       clock.Clock
	log         *slog.Logger
	cluster     Cluster
	src         datapath.Reader // nil when no kube-proxy state is present
	notes       []string        // Options.Notes
	nodeSources []FindingSource // Options.NodeSources: run in the background (nodeRuns)
	recorder    Recorder
	kick        chan struct{}
	// changes belongs to the loop's goroutine (Run and what it calls); nil:
	// no change events (polling only), also once the subscription ended.
	changes <-chan datapath.ChangeEvent
	// appliedInPlace, the loop goroutine's too, says a change event was
	// applied to a reader that shares its observation's frontends with its
	// cache (datapath.Freezer) since the last compare: the last observation
	// may have changed in place (drift.Changes.ObservedInPlace).
	appliedInPlace bool

	// mu guards every field below. The parts (tracker, sched, health,
	// nodeRuns, sources) have no lock of their own: each is changed only by
	// its own methods, and the agent calls them with mu held. One lock,
	// because a step changes several parts together and publishes what they
	// hold as one state; it is not held during a datapath read or a node run
	// (docs/architecture.md, "The agent loop").
	mu       sync.Mutex
	tracker  changeTracker   // the desired state per service, what changed, lag
	sched    scheduler       // when to read: due time, change-event hints, read cost
	health   watchHealth     // is the watch current (Lease renewals, deliveries)
	nodeRuns nodeRuns        // the node sources' background runs
	sources  sourceHealth    // the health of the reader and the node sources
	comparer *drift.Comparer // desired vs observed, compared again only where either changed
	findings *drift.FindingTracker
	recent   []drift.LagSample
	state    State
	mode     string // datapath mode (model.Mode*), as detected by the last read
	reason   string // why that mode
	view     viewTracker
	read     readState  // what the datapath reads found, for the view
	degraded []Fallback // fallbacks known at start or met by the loop (not the reader's)
	readerFB Fallback   // the reader's fallback in force (Reader "" when none)
	// frozenObs is the last copy of the reader's observation handed out
	// (observedLocked)
	frozenObs model.Observed
	// eventsLost counts the lost-events notices of the change events
	// (kernel socket overrun, or the loop fell behind): each one a full read
	eventsLost uint64
	// gen follows the nf_tables generation of the published view, to tell
	// how far it trails the kernel (behind.go)
	gen viewGen
}

// Options wires the agent's collaborators explicitly.
type Options struct {
	Config   Config
	Clock    clock.Clock
	Log      *slog.Logger
	Cluster  Cluster
	Datapath datapath.Reader // nil: none detected
	Mode     string          // datapath mode name (model.Mode*)
	Reason   string          // why that mode
	// Changes are the nf_tables change events of the node (nil: none); the
	// loop applies each to the reader and dates the next read by it.
	Changes <-chan datapath.ChangeEvent
	// Commits is the change feed's log of the kernel's commits (nil: no
	// change events): with it every answer says how far the datapath view
	// trails the kernel, and a view that trails it longer than stale-after
	// is not current.
	Commits CommitLog
	// NodeSources are the node sources (routes, links, conntrack,
	// cluster-scope checks), run in the background on their own cadence.
	NodeSources []FindingSource
	Recorder    Recorder
	// Fallbacks are the degraded paths known at start (no change events:
	// polling only; events dated when read).
	Fallbacks []Fallback
	// Notes are degraded-mode explanations known at start (such as change
	// events dated when read, not by the kernel); /v1/status shows them.
	Notes []string
	// PodDeletions is the node's registry of pod deletion requests: the
	// agent records the watch's pod deliveries into it (before any other
	// reader of the same delivery runs) and dates removals by it; others,
	// such as the RST pipeline, only read it. nil: the agent's own,
	// deletions.DefaultKeep.
	PodDeletions *deletions.Registry
	// Semantics, when set, adjusts each desired verdict (kube-proxy's
	// semantics) to the datapath's own (datapath.Semantics: Cilium).
	Semantics func(model.Verdict) model.Verdict
}

// New builds an agent.
func New(o Options) *Agent {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Recorder == nil {
		o.Recorder = nopRecorder{}
	}
	if o.PodDeletions == nil {
		o.PodDeletions = deletions.New(0)
	}
	a := &Agent{
		cfg: o.Config, clock: o.Clock, log: o.Log, cluster: o.Cluster, src: o.Datapath,
		mode: o.Mode, reason: o.Reason, changes: o.Changes, notes: o.Notes, nodeSources: o.NodeSources, recorder: o.Recorder,
		kick:     make(chan struct{}, 1),
		tracker:  newChangeTracker(o.PodDeletions, o.Semantics),
		comparer: drift.NewComparer(),
		findings: drift.NewFindingTracker(o.Config.StaleAfter),
		sources:  sourceHealth{},
		view:     newViewTracker(o.Clock.Now()),
		degraded: append([]Fallback(nil), o.Fallbacks...),
		gen:      newViewGen(o.Commits),
	}
	if a.mode == "" {
		a.mode = model.ModeNone
	}
	a.state = State{Node: a.cfg.NodeName, Datapath: a.mode, DatapathReason: a.reason, ReadyReason: "starting"}
	return a
}

// State returns the latest published snapshot.
func (a *Agent) State() State { return a.stateOf(true) }

// SummaryState is State without the desired state and without the observed
// frontends (Observed keeps its datapath, version and warnings): what
// /readyz, /v1/status, /v1/drift and /v1/rsts show. State copies both
// frontend maps whenever they changed since the last copy, a cost that
// grows with the cluster and that a frequent probe or poll must not pay.
func (a *Agent) SummaryState() State { return a.stateOf(false) }

func (a *Agent) stateOf(frontends bool) State {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.state
	s.Now = a.clock.Now()
	if s.LastAudit.IsZero() { // not published yet (caches not synced): the notes known at start
		s.Notes = slices.Clone(a.notes)
	}
	s.FullAudits, s.FullAuditCorrections = a.tracker.fullAuditCounts()
	if !s.LastAudit.IsZero() { // published at least once
		if frontends {
			s.Desired = a.tracker.frozenDesired(a.cfg.NodeName)
		}
		s.DesiredFrontends = a.tracker.desiredCount()
		s.Recent = a.recentLocked()
		s.Stale, s.Pending = a.findings.Stale(), a.findings.Pending()
	}
	if frontends {
		s.Observed = a.observedLocked(s.Observed)
	} else {
		o := s.Observed
		s.Observed = model.Observed{Datapath: o.Datapath, Version: o.Version, Warnings: o.Warnings} // shared, as State's copies share them
	}
	a.judgeLocked(&s)
	s.Fallbacks = a.fallbacksLocked()
	// Changes are recorded as the watch delivers them, not at the next
	// audit: show them at once (the next read may be a poll away).
	s.PendingChanges = a.tracker.pendingChanges()
	s.ChangeEventsLost, s.TriggerSkew = a.eventsLost, a.tracker.skew.counts
	s.LagSamplesDropped = a.tracker.lagSamplesDropped()
	if n := s.TriggerSkew.note(); n != "" {
		s.Notes = append(s.Notes[:len(s.Notes):len(s.Notes)], n) // a copy: a.state's notes are shared
	}
	return s
}

// Findings returns the stale findings and the mismatches pending promotion
// as the last audit left them, and nothing else (hurt.Findings).
func (a *Agent) Findings() (stale, pending []drift.Tracked) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.findings.Stale(), a.findings.Pending()
}

// EndpointsOf returns, for each of ips that is a desired endpoint on this
// node, its endpoints (service port, endpoint port, readiness): a lookup
// per address, for the RST pipeline, which asks about the pod addresses it
// watches every time they change, and must not pay a copy or a scan of the
// desired state for it. Empty before the initial list.
func (a *Agent) EndpointsOf(ips []netip.Addr) map[netip.Addr][]model.ServiceEndpoint {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tracker.endpointsOf(ips)
}

// LagState is State with only what /v1/lag shows: the node, the time, the
// recent lag samples and the pending changes. It copies neither the
// desired nor the observed state, which State copies after every change: a
// lag poller under churn would pay a copy of both per call.
func (a *Agent) LagState() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := State{Node: a.state.Node, Now: a.clock.Now()}
	if !a.state.LastAudit.IsZero() { // published at least once
		s.Recent = a.recentLocked()
	}
	a.judgeLocked(&s)
	s.PendingChanges = a.tracker.pendingChanges()
	return s
}

// OnEvent records a watch delivery. Safe to call from informer goroutines.
func (a *Agent) OnEvent(ev watch.Event) {
	a.mu.Lock()
	a.health.record(ev)
	switch ev.Kind {
	case watch.KindService, watch.KindEndpointSlice:
		a.tracker.markDirty(ev.Service, ev.At, ev.TriggerTime)
	case watch.KindNode:
		if ev.Deleted { // endpoints on it, routes to it: check now, not on the slow cadence
			a.nodeRuns.runSoon()
		}
		if ev.Name == a.cfg.NodeName { // zone label: topology may change
			for _, k := range a.cluster.ServiceKeys() {
				a.tracker.markDirty(k, ev.At, time.Time{})
			}
		}
	case watch.KindPod:
		a.tracker.recordDeletion(ev)
	}
	a.mu.Unlock()
	if ev.Kind == watch.KindLease && !ev.LeaseRenew.IsZero() {
		a.recorder.ObserveWatchDelay("lease", ev.At.Sub(ev.LeaseRenew))
	}
	if ev.Kind == watch.KindEndpointSlice {
		// A skewed trigger time measures no delay (drift.JudgeTrigger).
		if t0, _ := drift.JudgeTrigger(ev.TriggerTime, ev.At); !t0.IsZero() {
			a.recorder.ObserveWatchDelay("endpointslice", ev.At.Sub(t0))
		}
	}
	a.Kick()
}

// Kick asks the loop to run a step soon.
func (a *Agent) Kick() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Run runs the loop until ctx is done.
func (a *Agent) Run(ctx context.Context) error {
	t := a.clock.NewTimer(0)
	defer t.Stop()
	for {
		a.Step(ctx)
		wait := a.nextWait()
		t.Reset(wait)
		took := false
		select {
		case <-ctx.Done():
			return nil
		case <-a.kick:
		case ev, ok := <-a.changes:
			a.onChange(ctx, ev, ok)
			took = true
		case <-t.C():
		}
		// select picks at random among ready cases: a change event that came
		// while the step ran must date the next read even when the timer won.
		// Only one event per step: a read after two would date the state it
		// finds, the second's changes included, by the first one's arrival.
		if !took {
			select {
			case ev, ok := <-a.changes:
				a.onChange(ctx, ev, ok)
			default:
			}
		}
	}
}

// onChange applies an nf_tables change event to the reader (so the next read
// re-reads only what changed) and dates the next read by it. A closed
// channel means the subscription ended: the loop polls from then on.
func (a *Agent) onChange(ctx context.Context, ev datapath.ChangeEvent, ok bool) {
	if !ok {
		a.log.Warn("nftables change events ended: polling only")
		a.changes = nil // the next read's Evented check sees it
		a.mu.Lock()
		a.gen.ended()
		a.degraded = append(a.degraded, Fallback{Reader: FallbackChangeEvents, From: "events", To: "polling",
			Reason: "the nftables change event subscription ended", Since: a.clock.Now()})
		a.mu.Unlock()
		return
	}
	if a.log.Enabled(ctx, slog.LevelDebug) {
		a.log.Debug("datapath changed", "generation", ev.Generation, "process", ev.Process, "pid", ev.PID)
	}
	switch {
	case a.src == nil:
	case ev.Lost:
		// Events were dropped (socket buffer overrun): no event will bring
		// the reader's cache up to date, so the next read is a full one.
		a.log.Info("nftables change events lost; the next read is a full one")
		a.src.Resync()
		a.mu.Lock()
		a.eventsLost++
		a.mu.Unlock()
	default:
		if _, shared := a.src.(datapath.Freezer); shared {
			a.appliedInPlace = true
		}
		if err := a.src.ApplyChange(ctx, ev); err != nil {
			a.log.Warn("applying a datapath change event failed; the next read is a full one", "err", err)
		}
	}
	at := ev.Received
	if at.IsZero() {
		at = a.clock.Now()
	}
	a.mu.Lock()
	a.sched.noteEvent(at)
	a.gen.applied(ev.Generation)
	a.mu.Unlock()
}
