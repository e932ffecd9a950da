package rst

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"
)

// TraceOptions configures `netdrift trace-rsts`.
type TraceOptions struct {
	IPs      []netip.Addr  // addresses to watch (--ip, comma separated)
	Port     uint16        // only resets on this port of the watched address; 0 = any (--port)
	Duration time.Duration // how long to watch (--duration)
	Mode     Mode          // force a probe mode; "" selects automatically

	// Attached, when set, is called once the probe is attached and every
	// address is watched: resets from then on are counted, none before.
	Attached func(TraceStart)
	// Event, when set, receives each reset event as it arrives (--watch),
	// from one goroutine, all before Trace returns. Events are samples:
	// the kernel emits at most EventsPerSecond per second per CPU; the
	// counts are exact regardless.
	Event func(Event)
}

// TraceStart is the moment counting starts.
type TraceStart struct {
	Time   time.Time
	Mode   Mode
	Reason string // why this mode (Status.Reason)
}

// TraceResult is what trace-rsts prints.
type TraceResult struct {
	Mode            Mode              `json:"mode"`
	Started         time.Time         `json:"started"` // when counting started (TraceStart.Time)
	DurationSeconds float64           `json:"duration_seconds"`
	Counts          map[string]uint64 `json:"counts"`  // sent_by + sent_to
	SentBy          map[string]uint64 `json:"sent_by"` // resets the address sent (connection refused by it)
	SentTo          map[string]uint64 `json:"sent_to"` // resets sent to the address
	// Events says how many events were delivered, with TraceOptions.Event.
	Events *TraceEvents `json:"events,omitempty"`
}

// TraceEvents are the event samples of a trace.
type TraceEvents struct {
	Delivered uint64 `json:"delivered"`
	// NotSampled are resets without an event: over the kernel's rate limit,
	// or lost to a full ring buffer.
	NotSampled uint64 `json:"not_sampled"`
}

// ParseIPList parses "IP[,IP...]".
func ParseIPList(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != ',' {
			continue
		}
		f := s[start:i]
		start = i + 1
		if f == "" {
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("--ip: item %d %q: %w", len(out)+1, f, err)
		}
		out = append(out, a.Unmap())
	}
	if len(out) == 0 {
		return nil, errors.New("--ip: no addresses")
	}
	return out, nil
}

// eventsIdle is how long Trace keeps delivering events after the trace
// ends, once none arrived for that long (up to eventsDrainMax): events of
// resets just before the end are still in the ring buffer.
const (
	eventsIdle     = 50 * time.Millisecond
	eventsDrainMax = time.Second
)

// Trace watches opts.IPs for opts.Duration (or until ctx ends) without a
// cluster and returns the reset counts.
func Trace(ctx context.Context, opts TraceOptions) (TraceResult, error) {
	if len(opts.IPs) == 0 {
		return TraceResult{}, errors.New("trace-rsts: no --ip given")
	}
	if opts.Duration <= 0 {
		return TraceResult{}, errors.New("trace-rsts: --duration must be positive")
	}
	p, err := Load(Config{Mode: opts.Mode, NoEvents: opts.Event == nil})
	if err != nil {
		return TraceResult{}, fmt.Errorf("trace-rsts: %w", err)
	}
	defer p.Close()
	for _, ip := range opts.IPs {
		if err := p.WatchPort(ip, opts.Port); err != nil {
			return TraceResult{}, fmt.Errorf("trace-rsts: %w", err)
		}
	}
	start := time.Now()
	if opts.Attached != nil {
		st := p.Status()
		opts.Attached(TraceStart{Time: start, Mode: st.Mode, Reason: st.Reason})
	}
	ev := startEvents(p, opts.Event)
	t := time.NewTimer(opts.Duration)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	delivered := ev.stop()
	counts, err := p.Counts()
	if err != nil {
		return TraceResult{}, fmt.Errorf("trace-rsts: %w", err)
	}
	res := NewTraceResult(p.Mode(), time.Since(start), opts.IPs, counts)
	res.Started = start
	if opts.Event != nil {
		stats, err := p.Stats()
		if err != nil {
			return TraceResult{}, fmt.Errorf("trace-rsts: %w", err)
		}
		res.Events = &TraceEvents{Delivered: delivered, NotSampled: stats.EventsRateLimited + stats.EventsLost}
	}
	return res, nil
}

// eventPump delivers a probe's events to a function until stopped.
type eventPump struct {
	cancel    context.CancelFunc
	done      chan struct{}
	last      atomic.Int64 // UnixNano of the last event delivered
	delivered atomic.Uint64
}

// startEvents delivers p's events to fn (nil: none) from one goroutine.
func startEvents(p *Probe, fn func(Event)) *eventPump {
	e := &eventPump{done: make(chan struct{})}
	if fn == nil {
		close(e.done)
		e.cancel = func() {}
		return e
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	evs := p.Events(ctx)
	go func() {
		defer close(e.done)
		for ev := range evs {
			fn(ev)
			e.delivered.Add(1)
			e.last.Store(time.Now().UnixNano())
		}
	}()
	return e
}

// stop waits until no event arrived for eventsIdle (at most
// eventsDrainMax), stops the delivery and returns how many were delivered.
func (e *eventPump) stop() uint64 {
	end := time.Now()
	for deadline := end.Add(eventsDrainMax); time.Now().Before(deadline); {
		last := time.Unix(0, e.last.Load())
		if last.Before(end) {
			last = end
		}
		if time.Since(last) >= eventsIdle {
			break
		}
		time.Sleep(eventsIdle / 5)
	}
	e.cancel()
	<-e.done
	return e.delivered.Load()
}

// NewTraceResult builds the result; every requested address appears, with 0
// when nothing was counted.
func NewTraceResult(mode Mode, d time.Duration, ips []netip.Addr, counts map[netip.Addr]Counts) TraceResult {
	r := TraceResult{Mode: mode, DurationSeconds: d.Round(time.Millisecond).Seconds(),
		Counts: map[string]uint64{}, SentBy: map[string]uint64{}, SentTo: map[string]uint64{}}
	for _, ip := range ips {
		c := counts[ip.Unmap()]
		k := ip.Unmap().String()
		r.Counts[k] = c.Total()
		r.SentBy[k] = c.SentBy
		r.SentTo[k] = c.SentTo
	}
	return r
}
