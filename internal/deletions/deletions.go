// Package deletions is the node's one registry of pod deletion requests:
// when each pod of this node was asked to go, by pod address. The agent
// records the watch's pod deliveries into it and dates endpoint removals by
// it; the RST pipeline reads it to stamp the addresses it watches. Its lock
// is a leaf: no method calls out while holding it, so any caller may read it
// under its own lock.
package deletions

import (
	"net/netip"
	"sync"
	"time"
)

// DefaultKeep is how long a deletion is kept after its delivery when the
// owner sets no retention.
const DefaultKeep = 10 * time.Minute

// deletion is when a pod was asked to go.
type deletion struct {
	pod       string    // namespace/name
	requested time.Time // the pod's deletionTimestamp less its grace period
	seen      time.Time // delivery time (agent clock), for expiry
}

// Registry remembers pod deletion requests by address. Safe for concurrent
// use; one owner records and expires, others only read (Requested).
type Registry struct {
	keep time.Duration

	mu   sync.Mutex
	byIP map[netip.Addr]deletion
}

// New keeps each deletion for keep after its delivery (DefaultKeep when 0
// or less).
func New(keep time.Duration) *Registry {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Registry{keep: keep, byIP: map[netip.Addr]deletion{}}
}

// Keep is how long a deletion is kept after its delivery.
func (r *Registry) Keep() time.Duration { return r.keep }

// Record notes a pod delivery (pod as namespace/name, at its delivery time)
// carrying a deletion request; a zero requested records nothing. A later
// request of the same pod (a second delete, e.g. with grace 0) does not move
// the first; another pod on the address replaces it.
func (r *Registry) Record(pod string, ips []netip.Addr, requested, at time.Time) {
	if requested.IsZero() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ip := range ips {
		ip = ip.Unmap()
		old, ok := r.byIP[ip]
		if ok && old.pod == pod && !old.requested.After(requested) {
			continue
		}
		r.byIP[ip] = deletion{pod: pod, requested: requested, seen: at}
	}
}

// Requested is which pod at ip was asked to go, and when, if known.
func (r *Registry) Requested(ip netip.Addr) (pod string, at time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.byIP[ip.Unmap()]
	return d.pod, d.requested, ok
}

// Expire forgets the deletions delivered more than Keep before now.
func (r *Registry) Expire(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ip, d := range r.byIP {
		if now.Sub(d.seen) > r.keep {
			delete(r.byIP, ip)
		}
	}
}

// Len is the number of addresses remembered.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byIP)
}
