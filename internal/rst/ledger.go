package rst

import (
	"net/netip"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// StateCounts are the resets counted for one service by the state of the
// endpoint when it sent or received them.
type StateCounts struct {
	// Ready: before its pod's deletion request, the EndpointSlice calling the
	// endpoint Ready (on the reset's port; any port for resets on other ports).
	Ready uint64 `json:"ready"`
	// NotReady: before the deletion request, not a Ready endpoint (not yet
	// ready, failing its readiness probe, or backing no service).
	NotReady    uint64 `json:"not_ready"`
	Terminating uint64 `json:"terminating"` // at or after the deletion request
	Deleted     uint64 `json:"deleted"`     // at or after the pod left the API
	// ReadyRefusals are the Ready resets a Ready endpoint sent from its
	// Service's target port answering a connection attempt with no listener
	// (reason NO_SOCKET): clients of the Service refused while Ready.
	ReadyRefusals uint64 `json:"ready_refusals"`
	// TerminatingRefusals are the same for terminating and deleted pods: the
	// "connection refused" of a rollout (a subset of Terminating + Deleted).
	TerminatingRefusals uint64 `json:"terminating_refusals"`
}

// Total is every reset counted, whatever the state.
func (c StateCounts) Total() uint64 { return c.Ready + c.NotReady + c.Terminating + c.Deleted }

// Hurt is what netdrift_terminating_rsts_total counts: terminating and deleted.
func (c StateCounts) Hurt() uint64 { return c.Terminating + c.Deleted }

// ledger turns reads of the kernel's counters into per-service totals by
// state. Terminating and deleted resets, which the kernel classified at send
// time, count at once. Live resets wait in their time bucket until they are
// settled: as terminating (or deleted) as soon as the pod's deletion request
// is known to precede the bucket — the reset was sent after the request, the
// agent only learned of it later — or as ready / not ready once the bucket is
// older than the settle delay without such a request. Totals only grow.
type ledger struct {
	seen    map[CounterKey]uint64
	pending map[CounterKey]uint64
	totals  map[model.ServiceName]StateCounts
}

func newLedger() *ledger {
	return &ledger{seen: map[CounterKey]uint64{}, pending: map[CounterKey]uint64{}, totals: map[model.ServiceName]StateCounts{}}
}

// observe folds in one read of the counters (cumulative per key; a key that
// disappears was read for the last time).
func (l *ledger) observe(cs map[CounterKey]uint64, info func(netip.Addr) (watchEntry, bool)) {
	for k, cur := range cs {
		prev := l.seen[k]
		l.seen[k] = cur
		d := cur - prev
		if cur < prev {
			d = cur
		}
		if d == 0 {
			continue
		}
		if k.State == StateLive {
			l.pending[k] += d
			continue
		}
		e, _ := info(k.Addr)
		l.add(k, k.State, d, e)
	}
	for k := range l.seen {
		if _, ok := cs[k]; !ok {
			delete(l.seen, k)
		}
	}
}

// settle classifies the pending live resets that can be: mono maps an agent
// clock time to the kernel's clock, now is the kernel clock, after the
// settle delay; force settles every pending reset of these addresses (they
// are not watched any more).
func (l *ledger) settle(now uint64, after time.Duration, mono func(time.Time) uint64,
	info func(netip.Addr) (watchEntry, bool), force map[netip.Addr]watchEntry) {
	for k, n := range l.pending {
		e, ok := info(k.Addr)
		if f, forced := force[k.Addr]; forced {
			e, ok = f, true
		}
		start := k.Bucket << BucketShift
		mid := start + 1<<(BucketShift-1)
		end := start + 1<<BucketShift
		st := StateLive
		if ok && !e.Deleted.IsZero() && mid >= mono(e.Deleted) {
			st = StateTerminating
			if !e.gone.IsZero() && mid >= mono(e.gone) {
				st = StateDeleted
			}
		}
		_, forced := force[k.Addr]
		if st == StateLive && !forced && !(end+uint64(after) <= now) {
			continue
		}
		l.add(k, st, n, e)
		delete(l.pending, k)
	}
}

// unsettled is the number of live resets not yet settled.
func (l *ledger) unsettled() uint64 {
	var n uint64
	for _, v := range l.pending {
		n += v
	}
	return n
}

// add counts n resets for the service the key's port is an endpoint of, or
// else the address's primary service; with none known, for its pod's
// namespace's _unknown.
func (l *ledger) add(k CounterKey, st State, n uint64, e watchEntry) {
	sk := e.Service
	if r, ok := e.ports[k.Port]; ok && k.Port != 0 && !r.Service.IsZero() {
		sk = r.Service
	}
	if sk.IsZero() {
		sk.Namespace = e.Namespace
	}
	if sk.Namespace == "" {
		sk.Namespace = LabelUnknown
	}
	if sk.Name == "" {
		sk.Name = LabelUnknown
	}
	c := l.totals[sk]
	refusal := k.Dir == SentBy && k.Port != 0 && k.Reason == defaultReasons[ReasonNoSocket]
	switch st {
	case StateTerminating, StateDeleted:
		if st == StateTerminating {
			c.Terminating += n
		} else {
			c.Deleted += n
		}
		if refusal {
			c.TerminatingRefusals += n
		}
	default:
		ready := false
		if k.Port != 0 {
			ready = e.ports[k.Port].Ready
		} else {
			for _, r := range e.ports {
				ready = ready || r.Ready
			}
		}
		if ready {
			c.Ready += n
			if refusal {
				c.ReadyRefusals += n
			}
		} else {
			c.NotReady += n
		}
	}
	l.totals[sk] = c
}

// byState returns a copy of the totals.
func (l *ledger) byState() map[model.ServiceName]StateCounts {
	out := make(map[model.ServiceName]StateCounts, len(l.totals))
	for k, v := range l.totals {
		out[k] = v
	}
	return out
}
