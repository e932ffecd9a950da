package rst

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
)

// Prober is what the pipeline needs of the probe; *Probe implements it, and
// tests use fakes.
type Prober interface {
	Status() Status
	// WatchEndpoint watches a pod address with its state times (again: updates them).
	WatchEndpoint(ip netip.Addr, w WatchState) error
	// SetPorts sets a watched address's endpoint ports.
	SetPorts(ip netip.Addr, ports []uint16) error
	Unwatch(ip netip.Addr) error
	// Counters are the kernel's per-CPU counters summed, per key (and once
	// more for addresses unwatched since the previous call; drained live
	// buckets are returned a last time, then no more).
	Counters() (map[CounterKey]uint64, error)
	Stats() (Stats, error)
	// Events are rate-limited samples of the counted resets.
	Events(ctx context.Context) <-chan Event
}

// OpenProbe loads the probe for the agent in mode; disabled (a reason, e.g.
// "disabled by --no-rst-probe") returns a probe that only reports it. A probe
// that cannot load is logged and returned in ModeNone: the agent runs
// without it.
func OpenProbe(mode Mode, disabled string, log *slog.Logger) Prober {
	if disabled != "" {
		return offProbe{Status{Mode: ModeNone, Reason: disabled}}
	}
	p, err := Load(Config{Mode: mode})
	if err != nil {
		log.Warn("rst probe not loaded; the agent runs without it", "err", err)
	}
	return p
}

// offProbe is the probe when there is none: it says why and counts nothing.
type offProbe struct{ status Status }

func (o offProbe) Status() Status { return o.status }

func (o offProbe) WatchEndpoint(netip.Addr, WatchState) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, o.status.Reason)
}

func (o offProbe) SetPorts(netip.Addr, []uint16) error { return nil }

func (o offProbe) Unwatch(netip.Addr) error { return nil }

func (o offProbe) Counters() (map[CounterKey]uint64, error) { return map[CounterKey]uint64{}, nil }

func (o offProbe) Stats() (Stats, error) { return Stats{}, nil }

func (o offProbe) Events(context.Context) <-chan Event {
	ch := make(chan Event)
	close(ch)
	return ch
}
