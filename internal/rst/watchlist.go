package rst

import (
	"net/netip"
	"strings"
	"time"
)

// PodChange is one watch delivery of a pod of this node: what the pipeline
// needs of it to decide which addresses the probe watches.
type PodChange struct {
	Name string // namespace/name
	IPs  []netip.Addr
	// DeletionRequested is when the pod's deletion was requested; zero while
	// it is not being deleted.
	DeletionRequested time.Time
	Deleted           bool      // the pod is gone from the API (the informer's delete)
	At                time.Time // delivery time (agent clock)
}

// watchEntry is one watched address and what it stands for.
type watchEntry struct {
	Target
	gone time.Time // when the pod left the API; zero while it exists
}

// watchList decides which addresses the probe watches: a pod's addresses from
// the delivery of its deletion request until window after the pod left the
// API. An address another, live pod now uses is released at once. Pure: the
// pipeline applies the returned starts and stops to the probe.
type watchList struct {
	window  time.Duration
	entries map[netip.Addr]watchEntry
	tbl     *Table // cache of table(), nil after a change
}

func newWatchList(window time.Duration) *watchList {
	return &watchList{window: window, entries: map[netip.Addr]watchEntry{}}
}

// apply folds one delivery in and returns the addresses to start watching
// and those to stop watching (with what they stood for). An address may be
// in both: one pod's address taken over by another terminating pod.
func (l *watchList) apply(c PodChange) (start []netip.Addr, stop map[netip.Addr]Target) {
	ns, pod, _ := strings.Cut(c.Name, "/")
	terminating := !c.DeletionRequested.IsZero() || c.Deleted
	for _, ip := range c.IPs {
		ip = ip.Unmap()
		e, ok := l.entries[ip]
		if ok && (e.Namespace != ns || e.Pod != pod) {
			if stop == nil {
				stop = map[netip.Addr]Target{}
			}
			stop[ip] = e.Target
			delete(l.entries, ip)
			l.tbl, ok = nil, false
		}
		if !terminating {
			continue
		}
		if !ok {
			e = watchEntry{Target: Target{Namespace: ns, Pod: pod, Deleted: c.DeletionRequested}}
			start = append(start, ip)
		}
		if e.Deleted.IsZero() || (!c.DeletionRequested.IsZero() && c.DeletionRequested.Before(e.Deleted)) {
			e.Deleted = c.DeletionRequested // a later delete (e.g. grace 0) does not move the first one
		}
		if c.Deleted && e.gone.IsZero() {
			e.gone = c.At
		}
		l.entries[ip] = e
		l.tbl = nil
	}
	return start, stop
}

// forget drops an address the probe could not watch.
func (l *watchList) forget(ip netip.Addr) {
	delete(l.entries, ip)
	l.tbl = nil
}

// expire removes and returns the addresses whose pod left the API at least
// window before now.
func (l *watchList) expire(now time.Time) map[netip.Addr]Target {
	var out map[netip.Addr]Target
	for ip, e := range l.entries {
		if !e.gone.IsZero() && now.Sub(e.gone) >= l.window {
			if out == nil {
				out = map[netip.Addr]Target{}
			}
			out[ip] = e.Target
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

// setService records the service an address is an endpoint of. Once known
// it sticks: the endpoint leaves the EndpointSlice before its pod is gone.
func (l *watchList) setService(ip netip.Addr, svc string) {
	if e, ok := l.entries[ip]; ok && svc != "" {
		if e.Service != svc {
			e.Service = svc
			l.entries[ip] = e
			l.tbl = nil
		}
	}
}

// namespaces maps each watched address to its pod's namespace.
func (l *watchList) namespaces() map[netip.Addr]string {
	out := make(map[netip.Addr]string, len(l.entries))
	for ip, e := range l.entries {
		out[ip] = e.Namespace
	}
	return out
}
