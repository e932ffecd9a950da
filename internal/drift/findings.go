package drift

import (
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// Proof describes how current the agent's view of the API is.
type Proof struct {
	// WatchHealthy is false when the watch is known to lag (Lease renewals
	// overdue). No mismatch is promoted to a stale finding meanwhile.
	WatchHealthy bool
	// LastDelivery is the latest time the watch delivered anything.
	LastDelivery time.Time
	// Changed are the services whose desired state changed since the previous
	// audit: a mismatch that appears with such a change was revealed by the
	// watch itself, so the view was current when it was first seen.
	Changed map[model.ServiceName]bool
}

// Tracked is a mismatch with its history.
type Tracked struct {
	model.Finding
	Proven bool // the agent's view was current after FirstSeen
	Stale  bool // promoted: older than stale-after and proven
}

// Age of the mismatch at now.
func (t Tracked) Age(now time.Time) time.Duration { return now.Sub(t.FirstSeen) }

// FindingTracker turns the mismatches of successive audits into pending
// mismatches and stale findings with first-seen times.
type FindingTracker struct {
	StaleAfter time.Duration
	seen       map[string]*Tracked
}

// NewFindingTracker returns a tracker promoting mismatches after staleAfter.
func NewFindingTracker(staleAfter time.Duration) *FindingTracker {
	return &FindingTracker{StaleAfter: staleAfter, seen: map[string]*Tracked{}}
}

// Update records the mismatches of one audit at time now. Mismatches no
// longer present are forgotten (healed).
func (t *FindingTracker) Update(current []model.Finding, now time.Time, p Proof) {
	t.UpdateSampled(current, nil, now, time.Time{}, p)
}

// UpdateSampled is Update for an audit that also folds in sampled
// mismatches: the findings of a check that ran at sampledAt (the node
// sources' background run), held until its next run. A sampled mismatch is
// dated by the run, not by the audits that fold it in again: it is promoted
// only when a run at least stale-after after the one that first found it
// still finds it, never on the age of a single sighting (an interface
// caught between its pod's deletion and its removal is gone a moment later).
func (t *FindingTracker) UpdateSampled(current, sampled []model.Finding, now, sampledAt time.Time, p Proof) {
	next := make(map[string]*Tracked, len(current)+len(sampled))
	for _, f := range current {
		t.track(next, f, now, p)
	}
	for _, f := range sampled {
		t.track(next, f, sampledAt, p)
	}
	t.seen = next
}

// track records one mismatch observed at at.
func (t *FindingTracker) track(next map[string]*Tracked, f model.Finding, at time.Time, p Proof) {
	k := f.Key()
	tr, ok := t.seen[k]
	if !ok {
		tr = &Tracked{Finding: f}
		tr.FirstSeen = at
		tr.Proven = p.Changed[f.Service.ServiceName]
	} else {
		first := tr.FirstSeen
		tr.Finding = f
		tr.FirstSeen = first
	}
	if !tr.Proven && p.LastDelivery.After(tr.FirstSeen) {
		tr.Proven = true
	}
	if !tr.Stale && tr.Proven && p.WatchHealthy && at.Sub(tr.FirstSeen) >= t.StaleAfter {
		tr.Stale = true
	}
	next[k] = tr
}

// HasPending reports whether any mismatch is not (yet) promoted.
func (t *FindingTracker) HasPending() bool {
	for _, tr := range t.seen {
		if !tr.Stale {
			return true
		}
	}
	return false
}

// Stale returns promoted findings, sorted.
func (t *FindingTracker) Stale() []Tracked { return t.list(true) }

// Pending returns mismatches not (yet) promoted, sorted.
func (t *FindingTracker) Pending() []Tracked { return t.list(false) }

func (t *FindingTracker) list(stale bool) []Tracked {
	var ks []model.Keyed[Tracked]
	for k, tr := range t.seen { // k is the finding's Key: not built again to sort
		if tr.Stale == stale {
			c := *tr
			c.Finding.FirstSeen = tr.FirstSeen
			ks = append(ks, model.Keyed[Tracked]{Key: k, Value: c})
		}
	}
	return model.SortedByKey(ks)
}
