package drift

import (
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// ChangeKind classifies a change of a service's desired backends on this node.
type ChangeKind string

const (
	ChangeAdd    ChangeKind = "add"    // backends or frontends appeared
	ChangeRemove ChangeKind = "remove" // backends or frontends went away: the connection-refused race
	ChangeUpdate ChangeKind = "update" // both, or a verdict change
)

// Change is one desired-state change of a service, as delivered by the watch.
type Change struct {
	Service model.ServiceName
	Kind    ChangeKind //
	T0      time.Time  // trigger time (control-plane clock); zero when unknown
	T1      time.Time  // watch delivery time (agent clock)
	// Desired is the service's new desired state on this node (empty when the
	// service was deleted). Previous is what it replaced.
	Desired  map[model.Frontend]model.Verdict
	Previous map[model.Frontend]model.Verdict
}

// T0 sources.
const (
	T0Trigger     = "trigger-time" // the EndpointSlice's last-change-trigger-time annotation
	T0PodDeletion = "pod-deletion" // the removed pod's deletion request (this node's pods only)
)

// T2WriteStamp is the T2 source of a sample dated by the kernel's stamp of
// the last write to Cilium's maps before the read that saw it.
const T2WriteStamp = "map-write-stamp"

// LagSample is one converged change.
type LagSample struct {
	Service    model.ServiceName
	Kind       ChangeKind
	T0, T1, T2 time.Time
	T0Source   string // T0Trigger or T0PodDeletion; "" when T0 is unknown
	// T2Source is T2WriteStamp when the kernel's stamp of the datapath's
	// last write dated T2; "" when a read or a change event did.
	T2Source   string
	Superseded int // how many older changes this one replaced before converging
	// Removed: backend addresses this change took away (what a removal's
	// trigger can be looked up by when the slice carries no trigger time).
	Removed []netip.Addr
}

// NodeLag is T2-T1: how long this node took to program what it was told.
func (s LagSample) NodeLag() time.Duration { return s.T2.Sub(s.T1) }

// NetworkLatency is T2-T0 (false when T0 is unknown).
func (s LagSample) NetworkLatency() (time.Duration, bool) {
	if s.T0.IsZero() {
		return 0, false
	}
	return s.T2.Sub(s.T0), true
}

// PendingChange is a change not yet seen in the datapath.
type PendingChange struct {
	Service    model.ServiceName
	Kind       ChangeKind
	T0, T1     time.Time
	Superseded int
	keys       []model.Frontend
	desired    map[model.Frontend]model.Verdict
	removed    []netip.Addr
}

// ClassifyChange derives add/remove/update from old and new desired states.
// It returns false when nothing this node programs changed.
func ClassifyChange(prev, next map[model.Frontend]model.Verdict) (ChangeKind, bool) {
	added, removed := false, false
	for fe, nv := range next {
		pv, ok := prev[fe]
		if !ok {
			added = true
			continue
		}
		if pv.Action != nv.Action {
			added, removed = true, true
			continue
		}
		for _, b := range nv.Backends {
			if !pv.HasBackend(b) {
				added = true
			}
		}
		for _, b := range pv.Backends {
			if !nv.HasBackend(b) {
				removed = true
			}
		}
	}
	for fe := range prev {
		if _, ok := next[fe]; !ok {
			removed = true
		}
	}
	switch {
	case added && removed:
		return ChangeUpdate, true
	case added:
		return ChangeAdd, true
	case removed:
		return ChangeRemove, true
	}
	return "", false
}

// RemovedBackends lists the backend addresses in prev that no frontend of
// next forwards to any more (sorted, unique).
func RemovedBackends(prev, next map[model.Frontend]model.Verdict) []netip.Addr {
	kept := map[netip.Addr]bool{}
	for _, v := range next {
		for _, b := range v.Backends {
			kept[b.Addr()] = true
		}
	}
	var out []netip.Addr
	for _, v := range prev {
		for _, b := range v.Backends {
			if a := b.Addr(); !kept[a] && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// LagTracker measures T2 for pending changes. It is pure: times come in as
// arguments. Not safe for concurrent use.
type LagTracker struct {
	pending map[model.ServiceName]*PendingChange
}

// NewLagTracker returns an empty tracker.
func NewLagTracker() *LagTracker { return &LagTracker{pending: map[model.ServiceName]*PendingChange{}} }

// Record registers a change. A change to a service that is still pending
// supersedes it: the sample will measure the newest change, and the
// frontends of both are checked.
func (t *LagTracker) Record(c Change) {
	p, ok := t.pending[c.Service]
	if !ok {
		p = &PendingChange{Service: c.Service}
		t.pending[c.Service] = p
	} else {
		p.Superseded++
	}
	p.Kind, p.T0, p.T1, p.desired = c.Kind, c.T0, c.T1, c.Desired
	p.keys = unionKeys(p.keys, c.Previous, c.Desired)
	p.removed = RemovedBackends(c.Previous, c.Desired)
}

func unionKeys(keys []model.Frontend, maps ...map[model.Frontend]model.Verdict) []model.Frontend {
	for _, m := range maps {
		for fe := range m {
			if !slices.Contains(keys, fe) {
				keys = append(keys, fe)
			}
		}
	}
	return keys
}

// Observe checks every pending change against a datapath observation taken
// at time at, and returns the changes that converged (T2 = at).
func (t *LagTracker) Observe(obs model.Observed, at time.Time) []LagSample {
	return t.ObserveSince(obs, at, at)
}

// ObserveSince checks every pending change delivered by at against an
// observation read at at that change events date: since is the earliest
// datapath change after the previous read or, when there was none, the last
// one before it (the observation has held since then). A change the
// observation shows converged at since, or at T1 when delivered later: the
// datapath had programmed it before the agent knew of it.
func (t *LagTracker) ObserveSince(obs model.Observed, at, since time.Time) []LagSample {
	var out []LagSample
	for svc, p := range t.pending {
		if at.Before(p.T1) || !matches(p, obs) {
			continue
		}
		src := ""
		if !p.T0.IsZero() {
			src = T0Trigger
		}
		out = append(out, LagSample{Service: svc, Kind: p.Kind, T0: p.T0, T1: p.T1, T2: laterOf(since, p.T1), T0Source: src,
			Superseded: p.Superseded, Removed: p.removed})
		delete(t.pending, svc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Service.String() < out[j].Service.String() })
	return out
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func matches(p *PendingChange, obs model.Observed) bool {
	for _, fe := range p.keys {
		want, wantOK := p.desired[fe]
		got, gotOK := obs.Frontends[fe]
		if wantOK && want.Uncertain != "" {
			continue
		}
		if wantOK != gotOK {
			return false
		}
		if wantOK && !sameVerdictIn(want, got, obs.Datapath) {
			return false
		}
	}
	return true
}

// SameVerdict reports whether two verdicts program the same behaviour: the
// same action and, for Forward, the same backends. It is not equality
// (model.Verdict.Equal): evidence, endpoints and uncertainty may differ.
// SameVerdict knows no datapath mode; sameVerdictIn, which the lag tracker
// uses, also counts Reject and Drop as the same in the modes where they are
// (sameAction).
func SameVerdict(a, b model.Verdict) bool { return sameVerdictIn(a, b, "") }

func sameVerdictIn(a, b model.Verdict, mode string) bool {
	if !sameAction(a.Action, b.Action, mode) {
		return false
	}
	return a.Action != model.Forward || slices.Equal(a.Backends, b.Backends)
}

// Drop forgets svc's pending change and reports whether there was one:
// for a change whose desired state is known to be wrong (a full audit
// found another one), whose sample would measure the datapath against a
// state nobody asked for and never come.
func (t *LagTracker) Drop(svc model.ServiceName) bool {
	_, ok := t.pending[svc]
	delete(t.pending, svc)
	return ok
}

// Len is the number of pending changes.
func (t *LagTracker) Len() int { return len(t.pending) }

// Pending lists pending changes, oldest first.
func (t *LagTracker) Pending() []PendingChange {
	out := make([]PendingChange, 0, len(t.pending))
	for _, p := range t.pending {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].T1.Equal(out[j].T1) {
			return out[i].T1.Before(out[j].T1)
		}
		return out[i].Service.String() < out[j].Service.String()
	})
	return out
}
