package rst

import (
	"cmp"
	"net/netip"
	"strings"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// PodChange is one watch delivery of a pod of this node: what the pipeline
// needs of it to decide which addresses the probe watches.
type PodChange struct {
	Name        string // namespace/name
	IPs         []netip.Addr
	Deleted     bool      // the pod is gone from the API (the informer's delete)
	HostNetwork bool      // its IPs are the node's: never watched
	At          time.Time // delivery time (agent clock)
}

// Deletions is the read side of the node's registry of pod deletion
// requests (deletions.Registry): which pod at an address was asked to go,
// and when. Its lock is a leaf, so the pipeline reads it under its own.
type Deletions interface {
	Requested(ip netip.Addr) (pod string, at time.Time, ok bool)
}

// EndpointRef is what a watched address is on one of its ports: an endpoint
// of a service, Ready or not (the EndpointSlice's condition).
type EndpointRef struct {
	Service model.ServiceName // a service of the pod's namespace
	Ready   bool
}

// watchEntry is one watched address and what it stands for.
type watchEntry struct {
	Target
	gone  time.Time              // when the pod left the API (agent clock); zero while it exists
	ports map[uint16]EndpointRef // endpoint ports, as last resolved (kept once known)
}

// watchList decides which addresses the probe watches: every address of a
// pod of this node (not on the host network) from its first delivery until
// window after the pod left the API, so the map is bounded by the node's
// pods. An address another pod now uses is released at once. Pure: the
// pipeline applies the returned changes to the probe.
type watchList struct {
	window    time.Duration
	deletions Deletions // nil: none known
	entries   map[netip.Addr]watchEntry
	tbl       *Table // cache of table(), nil after a change
}

func newWatchList(window time.Duration, dels Deletions) *watchList {
	return &watchList{window: window, deletions: dels, entries: map[netip.Addr]watchEntry{}}
}

// requested is when the pod (namespace/name) at ip was asked to go, by the
// registry; zero when unknown or when the registry's entry is another pod's.
func (l *watchList) requested(pod string, ip netip.Addr) time.Time {
	if l.deletions == nil {
		return time.Time{}
	}
	p, at, ok := l.deletions.Requested(ip)
	if !ok || p != pod {
		return time.Time{}
	}
	return at
}

// apply folds one delivery in and returns the addresses whose probe entry
// must be written (new, or a new deletion time) and those to stop watching
// (with what they stood for). An address may be in both: one pod's address
// taken over by another pod.
func (l *watchList) apply(c PodChange) (set []netip.Addr, stop map[netip.Addr]watchEntry) {
	if c.HostNetwork {
		return nil, nil
	}
	ns, pod, _ := strings.Cut(c.Name, "/")
	for _, ip := range c.IPs {
		ip = ip.Unmap()
		e, ok := l.entries[ip]
		if ok && (e.Namespace != ns || e.Pod != pod) {
			if stop == nil {
				stop = map[netip.Addr]watchEntry{}
			}
			stop[ip] = e
			delete(l.entries, ip)
			l.tbl, ok = nil, false
		}
		changed := !ok
		if !ok {
			e = watchEntry{Target: Target{Namespace: ns, Pod: pod}}
		}
		// The registry keeps a pod's first request; a request earlier than
		// the time the pod was seen gone replaces that.
		if req := l.requested(c.Name, ip); !req.IsZero() && (e.Deleted.IsZero() || req.Before(e.Deleted)) {
			e.Deleted, changed = req, true
		}
		if c.Deleted && e.gone.IsZero() {
			e.gone, changed = c.At, true
			if e.Deleted.IsZero() {
				e.Deleted = c.At
			}
		}
		if changed {
			l.entries[ip] = e
			l.tbl = nil
			set = append(set, ip)
		}
	}
	return set, stop
}

// forget drops an address the probe could not watch.
func (l *watchList) forget(ip netip.Addr) {
	delete(l.entries, ip)
	l.tbl = nil
}

// expire removes and returns the addresses whose pod left the API at least
// window before now.
func (l *watchList) expire(now time.Time) map[netip.Addr]watchEntry {
	var out map[netip.Addr]watchEntry
	for ip, e := range l.entries {
		if !e.gone.IsZero() && now.Sub(e.gone) >= l.window {
			if out == nil {
				out = map[netip.Addr]watchEntry{}
			}
			out[ip] = e
			delete(l.entries, ip)
			l.tbl = nil
		}
	}
	return out
}

// nextExpiry is when the next address expires; zero when none will.
func (l *watchList) nextExpiry() time.Time {
	var next time.Time
	for _, e := range l.entries {
		if e.gone.IsZero() {
			continue
		}
		if t := e.gone.Add(l.window); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// table is the attribution table of the watched addresses; callers must not
// modify it.
func (l *watchList) table() Table {
	if l.tbl == nil {
		t := Table{Addrs: make(map[netip.Addr]Target, len(l.entries))}
		for ip, e := range l.entries {
			t.Addrs[ip] = e.Target
		}
		l.tbl = &t
	}
	return *l.tbl
}

// addrs lists the watched addresses, sorted.
func (l *watchList) addrs() []netip.Addr {
	out := make([]netip.Addr, 0, len(l.entries))
	for ip := range l.entries {
		out = append(out, ip)
	}
	sortAddrs(out)
	return out
}

// setEndpoints records the service endpoints an address is, by port, and
// reports whether its set of endpoint ports changed. Once known a service
// sticks: the endpoint leaves the EndpointSlice before its pod is gone.
func (l *watchList) setEndpoints(ip netip.Addr, refs map[uint16]EndpointRef) (portsChanged bool) {
	e, ok := l.entries[ip]
	if !ok || len(refs) == 0 {
		return false
	}
	if e.ports == nil {
		e.ports = map[uint16]EndpointRef{}
	}
	for port, r := range refs {
		if _, had := e.ports[port]; !had {
			portsChanged = true
		}
		e.ports[port] = r
	}
	if svc := primaryService(e.ports); svc != e.Service {
		e.Service = svc
		l.tbl = nil
	}
	l.entries[ip] = e
	return portsChanged
}

// primaryService is the service an address's resets on no endpoint port are
// attributed to: the first by namespace and name; zero when none is known.
func primaryService(refs map[uint16]EndpointRef) model.ServiceName {
	var first model.ServiceName
	for _, r := range refs {
		if !r.Service.IsZero() && (first.IsZero() || serviceLess(r.Service, first)) {
			first = r.Service
		}
	}
	return first
}

// serviceLess orders services by namespace, then name.
func serviceLess(a, b model.ServiceName) bool {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name)) < 0
}

// namespaces maps each watched address to its pod's namespace.
func (l *watchList) namespaces() map[netip.Addr]string {
	out := make(map[netip.Addr]string, len(l.entries))
	for ip, e := range l.entries {
		out[ip] = e.Namespace
	}
	return out
}
