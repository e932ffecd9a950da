package rst

import (
	"context"
	"errors"
	"net/netip"
	"sync"

	"github.com/netdrift/netdrift/internal/model"
)

// fakeProbe behaves like Probe's counters: classified per watched address
// as the kernel does (its clock is now), final counts of an unwatched
// address reported once more, live buckets kept (never drained).
type fakeProbe struct {
	mu      sync.Mutex
	now     func() uint64
	watched map[netip.Addr]WatchState
	ports   map[netip.Addr]map[uint16]bool
	counts  map[CounterKey]uint64
	retired map[CounterKey]uint64
	full    bool // Watch fails (map full)
	events  chan Event
	stats   Stats
}

func newFakeProbe(now func() uint64) *fakeProbe {
	return &fakeProbe{now: now, watched: map[netip.Addr]WatchState{}, ports: map[netip.Addr]map[uint16]bool{},
		counts: map[CounterKey]uint64{}, retired: map[CounterKey]uint64{}, events: make(chan Event, 16)}
}

func (f *fakeProbe) Status() Status { return Status{Up: true, Mode: ModeTracepoint} }

func (f *fakeProbe) WatchEndpoint(ip netip.Addr, w WatchState) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full {
		return errors.New("map full")
	}
	f.watched[ip] = w
	return nil
}

func (f *fakeProbe) SetPorts(ip netip.Addr, ports []uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[uint16]bool{}
	for _, p := range ports {
		m[p] = true
	}
	f.ports[ip] = m
	return nil
}

func (f *fakeProbe) Unwatch(ip netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, n := range f.counts {
		if k.Addr == ip {
			f.retired[k] += n
			delete(f.counts, k)
		}
	}
	delete(f.watched, ip)
	delete(f.ports, ip)
	return nil
}

// reset counts n resets sent by ip from port, now, if watched.
func (f *fakeProbe) reset(ip netip.Addr, n uint64) { f.resetPort(ip, 0, n) }

func (f *fakeProbe) resetPort(ip netip.Addr, port uint16, n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.watched[ip]
	if !ok {
		return
	}
	now := f.now()
	k := CounterKey{Addr: ip, Dir: SentBy, Reason: "NO_SOCKET"}
	if f.ports[ip][port] {
		k.Port = port
	}
	switch {
	case w.GoneNs != 0 && now >= w.GoneNs:
		k.State = StateDeleted
	case w.TermNs != 0 && now >= w.TermNs:
		k.State = StateTerminating
	default:
		k.State, k.Bucket = StateLive, now>>BucketShift
	}
	f.counts[k] += n
}

func (f *fakeProbe) isWatched(ip netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.watched[ip]
	return ok
}

func (f *fakeProbe) Counters() (map[CounterKey]uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[CounterKey]uint64{}
	for k, n := range f.counts {
		out[k] = n
	}
	for k, n := range f.retired {
		out[k] += n
	}
	f.retired = map[CounterKey]uint64{}
	return out, nil
}

func (f *fakeProbe) Stats() (Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats, nil
}

func (f *fakeProbe) Events(ctx context.Context) <-chan Event { return f.events }

// fakeServices maps addresses to services (of any namespace that asks), as
// Ready endpoints on port 8080.
type fakeServices map[netip.Addr]string

func (s fakeServices) EndpointsOf(addrs map[netip.Addr]string) map[netip.Addr]map[uint16]EndpointRef {
	out := map[netip.Addr]map[uint16]EndpointRef{}
	for a, ns := range addrs {
		if svc, ok := s[a]; ok {
			out[a] = map[uint16]EndpointRef{8080: {Service: model.ServiceName{Namespace: ns, Name: svc}, Ready: true}}
		}
	}
	return out
}
