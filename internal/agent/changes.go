package agent

import (
	"net/netip"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

// changeTracker keeps the desired state per service, the services the watch
// changed since they were last applied, and the changes whose programming
// the lag tracker waits for.
type changeTracker struct {
	dirty      map[string]dirtyService // delivered, not yet applied
	changed    map[string]bool         // services changed since the last audit
	desired    map[string]map[model.Frontend]model.Verdict
	merged     mergedDesired // the node's whole desired state, kept up to date per service
	hintsStale bool          // the frontends or their service ports changed: hand new hints
	// frontends whose desired verdict may have changed since the last compare
	changedFrontends map[model.Frontend]bool
	initialized      bool
	lag              *drift.LagTracker
	deletions        map[netip.Addr]podDeletion // this node's pods being deleted, by IP
}

type dirtyService struct{ t0, t1 time.Time }

func newChangeTracker() changeTracker {
	return changeTracker{dirty: map[string]dirtyService{}, changed: map[string]bool{},
		desired: map[string]map[model.Frontend]model.Verdict{}, lag: drift.NewLagTracker(),
		changedFrontends: map[model.Frontend]bool{}, hintsStale: true}
}

// markDirty records a delivery for a service: at is T1, trigger (may be
// zero) the control plane's T0.
func (t *changeTracker) markDirty(svc string, at, trigger time.Time) {
	if svc == "" {
		return
	}
	d := t.dirty[svc]
	d.t1 = at
	if trigger.After(d.t0) {
		d.t0 = trigger
	}
	t.dirty[svc] = d
}

// initialize takes the initial list as the starting point, not as changes.
func (t *changeTracker) initialize(c Cluster, node *corev1.Node, nodeName string) {
	for _, k := range c.ServiceKeys() {
		t.desired[k] = watch.ExpectedService(node, nodeName, c.Service(k), c.SlicesFor(k))
	}
	t.dirty = map[string]dirtyService{}
	t.merged.rebuild(t.desired)
	t.initialized, t.hintsStale = true, true
}

// apply recomputes the desired state of dirty services and records their
// changes for lag measurement. It reports whether any desired state changed.
func (t *changeTracker) apply(c Cluster, node *corev1.Node, nodeName string) bool {
	any := false
	for svc, d := range t.dirty {
		next := watch.ExpectedService(node, nodeName, c.Service(svc), c.SlicesFor(svc))
		prev := t.set(svc, next)
		kind, changed := drift.ClassifyChange(prev, next)
		if !changed {
			continue
		}
		t.changed[svc], any = true, true
		t.lag.Record(drift.Change{Service: svc, Kind: kind, T0: d.t0, T1: d.t1, Previous: prev, Desired: next})
	}
	t.dirty = map[string]dirtyService{}
	return any
}

// resync derives every service's desired state again and replaces the ones
// that differ from what the incremental updates kept (not recorded as
// changes: nothing was delivered). It returns how many differed.
func (t *changeTracker) resync(c Cluster, node *corev1.Node, nodeName string) int {
	seen, differ := map[string]bool{}, 0
	for _, k := range c.ServiceKeys() {
		seen[k] = true
		if _, dirty := t.dirty[k]; dirty {
			continue // applied, and measured, at the next step
		}
		next := watch.ExpectedService(node, nodeName, c.Service(k), c.SlicesFor(k))
		if t.replaceIfDiffers(k, next) {
			differ++
		}
	}
	for k := range t.desired {
		if _, dirty := t.dirty[k]; !seen[k] && !dirty && t.replaceIfDiffers(k, nil) {
			differ++
		}
	}
	return differ
}

func (t *changeTracker) replaceIfDiffers(svc string, next map[model.Frontend]model.Verdict) bool {
	if sameDesired(t.desired[svc], next) {
		return false
	}
	t.set(svc, next)
	return true
}

// set replaces a service's desired state (nil: gone), noting its frontends
// and keeping the merged state; it returns the previous one.
func (t *changeTracker) set(svc string, next map[model.Frontend]model.Verdict) (prev map[model.Frontend]model.Verdict) {
	prev = t.desired[svc]
	if len(next) == 0 {
		delete(t.desired, svc)
	} else {
		t.desired[svc] = next
	}
	t.noteFrontends(prev, next)
	t.merged.replace(svc, prev, next)
	return prev
}

func sameDesired(a, b map[model.Frontend]model.Verdict) bool {
	if len(a) != len(b) {
		return false
	}
	for fe, v := range a {
		if w, ok := b[fe]; !ok || !reflect.DeepEqual(v, w) {
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

// takeChangedFrontends hands the frontends to compare again and forgets them.
func (t *changeTracker) takeChangedFrontends() map[model.Frontend]bool {
	c := t.changedFrontends
	t.changedFrontends = map[model.Frontend]bool{}
	return c
}
