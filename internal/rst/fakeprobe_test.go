package rst

import (
	"context"
	"errors"
	"net/netip"
	"sync"
)

// fakeProbe behaves like Probe's counters: counts per watched address since
// it was watched, final counts of an unwatched address reported once more.
type fakeProbe struct {
	mu      sync.Mutex
	watched map[netip.Addr]bool
	counts  map[netip.Addr]Counts
	retired map[netip.Addr]Counts
	full    bool // Watch fails (map full)
	events  chan Event
	stats   Stats
}

func newFakeProbe() *fakeProbe {
	return &fakeProbe{watched: map[netip.Addr]bool{}, counts: map[netip.Addr]Counts{},
		retired: map[netip.Addr]Counts{}, events: make(chan Event, 16)}
}

func (f *fakeProbe) Status() Status { return Status{Up: true, Mode: ModeTracepoint} }

func (f *fakeProbe) Watch(ip netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full {
		return errors.New("map full")
	}
	f.watched[ip] = true
	return nil
}

func (f *fakeProbe) Unwatch(ip netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.counts[ip]; ok {
		r := f.retired[ip]
		r.merge(c)
		f.retired[ip] = r
	}
	delete(f.watched, ip)
	delete(f.counts, ip)
	return nil
}

// reset counts n resets sent by ip, if watched.
func (f *fakeProbe) reset(ip netip.Addr, n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.watched[ip] {
		return
	}
	c := f.counts[ip]
	c.add(SentBy, "NO_SOCKET", n)
	f.counts[ip] = c
}

func (f *fakeProbe) isWatched(ip netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watched[ip]
}

func (f *fakeProbe) Counts() (map[netip.Addr]Counts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[netip.Addr]Counts{}
	for a, c := range f.counts {
		var cp Counts
		cp.merge(c)
		out[a] = cp
	}
	for a, c := range f.retired {
		cur := out[a]
		cur.merge(c)
		out[a] = cur
	}
	f.retired = map[netip.Addr]Counts{}
	return out, nil
}

func (f *fakeProbe) Stats() (Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats, nil
}

func (f *fakeProbe) Events(ctx context.Context) <-chan Event { return f.events }

// fakeServices maps addresses to services (of any namespace that asks).
type fakeServices map[netip.Addr]string

func (s fakeServices) ServicesOf(addrs map[netip.Addr]string) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for a := range addrs {
		if svc, ok := s[a]; ok {
			out[a] = svc
		}
	}
	return out
}
