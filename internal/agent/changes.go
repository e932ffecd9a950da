package agent

import (
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netdrift/netdrift/internal/deletions"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

// changeTracker is the one owner of the node's desired state: per service
// (desired), merged into one map (merged), the services the watch changed
// since they were last applied, and the changes whose programming the lag
// tracker waits for. Its fields are changed only by its methods, which the
// agent calls under its lock; callers check out what changed (the frontends
// to compare again, the services changed since the last audit, new hints)
// and get it handed over, as kube-proxy's change trackers hand out pending
// changes.
type changeTracker struct {
	dirty      map[model.ServiceName]dirtyService // delivered, not yet applied
	changed    map[model.ServiceName]bool         // services changed since the last audit
	desired    map[model.ServiceName]map[model.Frontend]model.Verdict
	merged     mergedDesired // the node's whole desired state, kept up to date per service
	endpoints  endpointIndex // its endpoints on this node, by address
	hintsStale bool          // the frontends or their service ports changed: hand new hints
	// frontends whose desired verdict may have changed since the last compare
	changedFrontends map[model.Frontend]bool
	initialized      bool
	lag              *drift.LagTracker
	deletions        *deletions.Registry // this node's pods being deleted, to date removals (the agent records it)
	// full audits run, and the services whose desired state they corrected
	fullAudits, fullCorrections uint64
	// suspects: the services the last full audit found differing, to
	// confirm at confirmAt (fullaudit.go)
	suspects  map[model.ServiceName]bool
	confirmAt time.Time
	// pending changes dropped, their sample never to come: a full audit
	// corrected the desired state they wait for
	lagDropped uint64
	// semantics adjusts kube-proxy's desired verdicts to the datapath's
	// (Options.Semantics); nil keeps them
	semantics func(model.Verdict) model.Verdict
	// skew counts the recorded changes whose trigger time was not used
	skew triggerSkew
}

// dirtyService is a service's deliveries since the last apply: T1 of the
// last, the latest plausible trigger time, and why the last implausible
// one was ignored (drift.JudgeTrigger).
type dirtyService struct {
	t0, t1  time.Time
	skew    drift.TriggerSkew
	skewed  time.Time // that trigger time
	skewedA time.Time // its delivery
}

func newChangeTracker(dels *deletions.Registry, semantics func(model.Verdict) model.Verdict) changeTracker {
	return changeTracker{deletions: dels, dirty: map[model.ServiceName]dirtyService{}, changed: map[model.ServiceName]bool{},
		desired: map[model.ServiceName]map[model.Frontend]model.Verdict{}, lag: drift.NewLagTracker(),
		changedFrontends: map[model.Frontend]bool{}, hintsStale: true, semantics: semantics}
}

// markDirty records a delivery for a service: at is T1, trigger (may be
// zero) the control plane's T0.
func (t *changeTracker) markDirty(svc model.ServiceName, at, trigger time.Time) {
	if svc.IsZero() {
		return
	}
	d := t.dirty[svc]
	d.t1 = at
	t0, skew := drift.JudgeTrigger(trigger, at)
	if skew != "" {
		d.skew, d.skewed, d.skewedA = skew, trigger, at
	}
	if t0.After(d.t0) {
		d.t0 = t0
	}
	t.dirty[svc] = d
}

// expected is one service's desired state: kube-proxy's semantics
// (watch.ExpectedService), adjusted by the datapath's own where it differs
// (t.semantics, nil for kube-proxy's modes).
func (t *changeTracker) expected(c Cluster, node *corev1.Node, nodeName string, svc model.ServiceName) map[model.Frontend]model.Verdict {
	m := watch.ExpectedService(node, nodeName, c.Service(svc), c.SlicesFor(svc))
	if t.semantics == nil {
		return m
	}
	for fe, v := range m {
		m[fe] = t.semantics(v)
	}
	return m
}

// recordDeletion remembers when a pod of this node was asked to go.
func (t *changeTracker) recordDeletion(ev watch.Event) {
	t.deletions.Record(ev.Name, ev.PodIPs, ev.DeletionRequested, ev.At)
}

// sync brings the desired state up to date with the watch cache. The first
// call takes the initial list as the starting point, not as changes (first
// is true); later calls recompute the dirty services and record their
// changes for lag measurement (changed: some desired state changed).
func (t *changeTracker) sync(c Cluster, node *corev1.Node, nodeName string) (first, changed bool) {
	if !t.initialized {
		t.initialize(c, node, nodeName)
		return true, false
	}
	return false, t.apply(c, node, nodeName)
}

func (t *changeTracker) initialize(c Cluster, node *corev1.Node, nodeName string) {
	for _, k := range c.ServiceKeys() {
		t.desired[k] = t.expected(c, node, nodeName, k)
	}
	t.dirty = map[model.ServiceName]dirtyService{}
	t.merged.rebuild(t.desired)
	t.endpoints.rebuild(nodeName, t.desired)
	t.initialized, t.hintsStale = true, true
}

func (t *changeTracker) apply(c Cluster, node *corev1.Node, nodeName string) bool {
	any := false
	for svc, d := range t.dirty {
		next := t.expected(c, node, nodeName, svc)
		prev := t.set(svc, next)
		kind, changed := drift.ClassifyChange(prev, next)
		if !changed {
			continue
		}
		t.changed[svc], any = true, true
		if d.skew != "" && d.t0.IsZero() {
			t.skew.count(svc, d.skew, d.skewed, d.skewedA)
		}
		t.lag.Record(drift.Change{Service: svc, Kind: kind, T0: d.t0, T1: d.t1, Previous: prev, Desired: next})
	}
	t.dirty = map[model.ServiceName]dirtyService{}
	return any
}

// set replaces a service's desired state (nil: gone), noting its frontends
// and keeping the merged state; it returns the previous one.
func (t *changeTracker) set(svc model.ServiceName, next map[model.Frontend]model.Verdict) (prev map[model.Frontend]model.Verdict) {
	prev = t.desired[svc]
	if len(next) == 0 {
		delete(t.desired, svc)
	} else {
		t.desired[svc] = next
	}
	t.noteFrontends(prev, next)
	t.merged.replace(svc, prev, next)
	t.endpoints.replace(prev, next)
	return prev
}

func sameDesired(a, b map[model.Frontend]model.Verdict) bool {
	if len(a) != len(b) {
		return false
	}
	for fe, v := range a {
		if w, ok := b[fe]; !ok || !v.Equal(w) {
			return false
		}
	}
	return true
}

// noteFrontends records the frontends of a service whose desired state was
// recomputed, and whether the readers' hints (frontends and their service
// ports) changed: an endpoint change alone does not change them.
func (t *changeTracker) noteFrontends(prev, next map[model.Frontend]model.Verdict) {
	for fe, v := range prev {
		t.changedFrontends[fe] = true
		if n, ok := next[fe]; !ok || n.Service != v.Service {
			t.hintsStale = true
		}
	}
	for fe := range next {
		t.changedFrontends[fe] = true
		if _, ok := prev[fe]; !ok {
			t.hintsStale = true
		}
	}
}

// liveDesired is the node's desired state as kept, changed in place by the
// next sync: valid under the agent's lock only.
func (t *changeTracker) liveDesired(node string) model.Desired { return t.merged.current(node) }

// frozenDesired is a copy of the node's desired state that nothing changes
// (copied again only after a change), for whatever keeps it beyond the
// agent's lock.
func (t *changeTracker) frozenDesired(node string) model.Desired { return t.merged.snapshot(node) }

// desiredCount is the number of desired frontends.
func (t *changeTracker) desiredCount() int { return t.merged.count() }

// lagSamplesDropped is how many pending changes a full audit dropped.
func (t *changeTracker) lagSamplesDropped() uint64 { return t.lagDropped }

// ready reports whether the initial list was taken.
func (t *changeTracker) ready() bool { return t.initialized }

// endpointsOf is the desired endpoints on this node of each of ips.
func (t *changeTracker) endpointsOf(ips []netip.Addr) map[netip.Addr][]model.ServiceEndpoint {
	return t.endpoints.lookup(ips)
}

// busy reports whether a change waits to be programmed.
func (t *changeTracker) busy() bool { return t.lag.Len() > 0 }

// pendingChanges lists the changes not yet programmed, oldest first (none
// before the initial list).
func (t *changeTracker) pendingChanges() []drift.PendingChange {
	if !t.initialized {
		return nil
	}
	return t.lag.Pending()
}

// observe matches the pending changes against a read that began at at and
// found a state that held since since, and returns the lag samples of the
// changes it shows programmed, removals dated by their pods' deletion
// requests where the watch gave no trigger time. now expires old deletions.
func (t *changeTracker) observe(obs model.Observed, at, since, now time.Time) []drift.LagSample {
	t.deletions.Expire(now)
	samples := t.lag.ObserveSince(obs, at, since)
	for i, s := range samples {
		samples[i] = dateRemoval(t.deletions, s)
	}
	return samples
}

// takeChangedFrontends hands over the frontends to compare again and
// forgets them.
func (t *changeTracker) takeChangedFrontends() map[model.Frontend]bool {
	c := t.changedFrontends
	t.changedFrontends = map[model.Frontend]bool{}
	return c
}

// takeChangedServices hands over the services changed since the last
// audit (the findings' proof of a change) and forgets them.
func (t *changeTracker) takeChangedServices() map[model.ServiceName]bool {
	c := t.changed
	t.changed = map[model.ServiceName]bool{}
	return c
}

// takeHints hands over the readers' hints when the frontends or their
// service ports changed since the last hand-over (not on every endpoint
// change); false when they did not.
func (t *changeTracker) takeHints(node string) (model.Hints, bool) {
	if !t.hintsStale {
		return model.Hints{}, false
	}
	t.hintsStale = false
	return model.HintsFor(t.merged.current(node)), true
}
