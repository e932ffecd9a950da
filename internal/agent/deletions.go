package agent

import (
	"net/netip"
	"time"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/watch"
)

// deletionMemory is how long a pod's deletion time is kept to date a removal.
const deletionMemory = 10 * time.Minute

// podDeletion is when a pod of this node was asked to go.
type podDeletion struct {
	pod       string
	requested time.Time
	seen      time.Time // agent clock, for expiry
}

// recordDeletionLocked remembers when this node's pods were asked to go. An
// endpoint removal that a pod deletion triggers carries no trigger time in
// its EndpointSlice (the controller sets the annotation from
// the pod's Ready transition, which comes later). For this node's pods the
// agent knows the deletion request time, which is the start the preStop
// advice must cover.
func (t *changeTracker) recordDeletion(ev watch.Event) {
	if ev.DeletionRequested.IsZero() {
		return
	}
	if t.deletions == nil {
		t.deletions = map[netip.Addr]podDeletion{}
	}
	for _, ip := range ev.PodIPs {
		old, ok := t.deletions[ip]
		if ok && old.pod == ev.Name && !old.requested.After(ev.DeletionRequested) {
			continue // a second delete (e.g. grace 0) does not move the first
		}
		t.deletions[ip] = podDeletion{pod: ev.Name, requested: ev.DeletionRequested, seen: ev.At}
	}
}

// datedRemovalLocked fills T0 of a removal sample without one from the
// earliest deletion request of the pods whose addresses it removed.
func (t *changeTracker) datedRemoval(s drift.LagSample) drift.LagSample {
	if !s.T0.IsZero() || len(s.Removed) == 0 {
		return s
	}
	var t0 time.Time
	for _, ip := range s.Removed {
		if d, ok := t.deletions[ip]; ok && (t0.IsZero() || d.requested.Before(t0)) {
			t0 = d.requested
		}
	}
	if !t0.IsZero() && !t0.After(s.T2) && s.T2.Sub(t0) <= deletionMemory {
		s.T0, s.T0Source = t0, drift.T0PodDeletion
	}
	return s
}

func (t *changeTracker) expireDeletions(now time.Time) {
	for ip, d := range t.deletions {
		if now.Sub(d.seen) > deletionMemory {
			delete(t.deletions, ip)
		}
	}
}
