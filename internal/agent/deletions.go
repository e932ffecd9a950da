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

// podDeletions remembers when this node's pods were asked to go, by pod
// address. An endpoint removal that a pod deletion triggers carries no
// trigger time in its EndpointSlice (the controller sets the annotation
// from the pod's Ready transition, which comes later); for this node's pods
// the deletion request time is known, and it is the start the preStop
// advice must cover. Its fields are changed only by its methods.
type podDeletions struct {
	byIP map[netip.Addr]podDeletion
}

// record notes a pod delivery carrying a deletion request.
func (d *podDeletions) record(ev watch.Event) {
	if ev.DeletionRequested.IsZero() {
		return
	}
	if d.byIP == nil {
		d.byIP = map[netip.Addr]podDeletion{}
	}
	for _, ip := range ev.PodIPs {
		old, ok := d.byIP[ip]
		if ok && old.pod == ev.Name && !old.requested.After(ev.DeletionRequested) {
			continue // a second delete (e.g. grace 0) does not move the first
		}
		d.byIP[ip] = podDeletion{pod: ev.Name, requested: ev.DeletionRequested, seen: ev.At}
	}
}

// requested is when the pod at ip was asked to go, if known.
func (d *podDeletions) requested(ip netip.Addr) (pod string, at time.Time, ok bool) {
	p, ok := d.byIP[ip]
	return p.pod, p.requested, ok
}

// dateRemoval fills T0 of a removal sample without one from the earliest
// deletion request of the pods whose addresses it removed.
func (d *podDeletions) dateRemoval(s drift.LagSample) drift.LagSample {
	if !s.T0.IsZero() || len(s.Removed) == 0 {
		return s
	}
	var t0 time.Time
	for _, ip := range s.Removed {
		if p, ok := d.byIP[ip]; ok && (t0.IsZero() || p.requested.Before(t0)) {
			t0 = p.requested
		}
	}
	if !t0.IsZero() && !t0.After(s.T2) && s.T2.Sub(t0) <= deletionMemory {
		s.T0, s.T0Source = t0, drift.T0PodDeletion
	}
	return s
}

// expire forgets deletions seen more than deletionMemory before now.
func (d *podDeletions) expire(now time.Time) {
	for ip, p := range d.byIP {
		if now.Sub(p.seen) > deletionMemory {
			delete(d.byIP, ip)
		}
	}
}

// len is the number of addresses remembered.
func (d *podDeletions) len() int { return len(d.byIP) }
