package rst

import (
	"net/netip"

	"github.com/netdrift/netdrift/internal/model"
)

// Snapshot is the pipeline's state at one counter read.
type Snapshot struct {
	Status  Status
	Watched []netip.Addr // sorted
	// Totals are the resets counted by the kernel sent by and to terminating
	// and deleted pods (ByState's Hurt), per service: the totals of
	// netdrift_terminating_rsts_total. See ledger for the labels of the
	// unattributed.
	Totals map[model.ServiceName]uint64
	// ByState are every settled reset by the endpoint's state when it was
	// sent, per service (netdrift_endpoint_rsts_total,
	// netdrift_ready_endpoint_refusals_total).
	ByState map[model.ServiceName]StateCounts
	// Unsettled are resets sent before any deletion request the agent knows
	// of, younger than the settle delay: not yet in ByState or Totals.
	Unsettled uint64
	// Samples are the newest attributed events, oldest first: rate-limited
	// samples, not a count.
	Samples  []Record
	Sampling Sampling
}

// Sampling says how Samples relate to the counted resets.
type Sampling struct {
	PerSecondPerCPU int    // the probe's event rate limit
	Max             int    // samples kept
	RateLimited     uint64 // events the kernel did not emit (rate limit); counted all the same
	RingFull        uint64 // events lost to a full ring buffer; counted all the same
	Evicted         uint64 // samples pushed out by newer ones
}

// Snapshot reads the kernel's counters now and returns the totals with the
// samples: every caller sees the same totals for the same kernel counts.
func (p *Pipeline) Snapshot() Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resolveLocked()
	p.refreshLocked(nil)
	recs, evicted := p.samples.list()
	by := p.ledger.byState()
	totals := make(map[model.ServiceName]uint64, len(by))
	for k, c := range by {
		if n := c.Hurt(); n > 0 {
			totals[k] = n
		}
	}
	return Snapshot{
		Status:    p.cfg.Probe.Status(),
		Watched:   p.list.addrs(),
		Totals:    totals,
		ByState:   by,
		Unsettled: p.ledger.unsettled(),
		Samples:   recs,
		Sampling: Sampling{PerSecondPerCPU: p.cfg.EventsPerSecond, Max: p.cfg.MaxSamples,
			RateLimited: p.stats.EventsRateLimited, RingFull: p.stats.EventsLost, Evicted: evicted},
	}
}
