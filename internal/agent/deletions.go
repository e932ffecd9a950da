package agent

import (
	"time"

	"github.com/netdrift/netdrift/internal/deletions"
	"github.com/netdrift/netdrift/internal/drift"
)

// dateRemoval fills T0 of a removal sample without one from the earliest
// deletion request of the pods whose addresses it removed (dels, the node's
// registry of pod deletions, which the agent records). An endpoint removal
// that a pod deletion triggers carries no trigger time in its EndpointSlice
// (the controller sets the annotation from the pod's Ready transition, which
// comes later); for this node's pods the deletion request time is known,
// and it is the start the preStop advice must cover.
func dateRemoval(dels *deletions.Registry, s drift.LagSample) drift.LagSample {
	if !s.T0.IsZero() || len(s.Removed) == 0 {
		return s
	}
	var t0 time.Time
	for _, ip := range s.Removed {
		if _, at, ok := dels.Requested(ip); ok && (t0.IsZero() || at.Before(t0)) {
			t0 = at
		}
	}
	if !t0.IsZero() && !t0.After(s.T2) && s.T2.Sub(t0) <= dels.Keep() {
		s.T0, s.T0Source = t0, drift.T0PodDeletion
	}
	return s
}
