package agent

import "time"

// scheduler decides when the loop reads the datapath: at once after a new
// change or a change event, fast polls while something is pending (never
// cheaper than the last read's cost allows), the slow audit otherwise.
type scheduler struct {
	lastRead     time.Time
	lastReadCost time.Duration // CPU of the last read (wall time when unknown)
	hinted       time.Time     // earliest change event since the last read
	freshChange  bool          // a change was recorded since the last read
	events       bool          // nf_tables change events flow: they, not polls, date the reads
	lastFull     time.Time     // the last full audit (zero: the first read is one)
	fullCost     time.Duration // what its read cost
}

// costBound is base, or factor times cost when that is longer (a budget:
// factor 100 keeps a periodic job near 1 % of a core), capped at limit when
// limit is positive (cost may be wall time, inflated on a loaded node).
func costBound(base time.Duration, factor int, cost, limit time.Duration) time.Duration {
	iv := max(base, time.Duration(factor)*cost)
	if limit > 0 {
		iv = min(iv, limit)
	}
	return iv
}

// fullDue reports whether the next read is a full audit: FullAuditInterval
// after the last one, or later when a full read costs more than the budget.
func (s *scheduler) fullDue(now time.Time, cfg Config) bool {
	if cfg.FullAuditInterval <= 0 {
		return false
	}
	iv := costBound(cfg.FullAuditInterval, cfg.FullAuditCostFactor, s.fullCost, 0)
	return !s.lastFull.IsZero() && now.Sub(s.lastFull) >= iv
}

// pollInterval is the fast-poll interval, never cheaper than the read cost allows.
func (s *scheduler) pollInterval(cfg Config) time.Duration {
	iv := s.costFloor(cfg)
	if s.events && cfg.EventPoll > iv {
		// Each commit of kube-proxy arrives as an event that triggers a
		// read at once; polling while something is pending is the safety
		// net for a lost event, and may be slow.
		iv = cfg.EventPoll
	}
	return iv
}

// costFloor is the shortest interval between two reads not triggered by a
// change event: FastPoll, or MinPollCostFactor times the last read's cost.
func (s *scheduler) costFloor(cfg Config) time.Duration {
	return costBound(cfg.FastPoll, cfg.MinPollCostFactor, s.lastReadCost, 0)
}

// interval is the read interval in the current state.
func (s *scheduler) interval(busy bool, cfg Config) time.Duration {
	if busy {
		return s.pollInterval(cfg)
	}
	// The idle audit too stays within a budget: a reader that reads the
	// whole table every time (iptables-legacy) audits a large cluster less
	// often than every AuditInterval.
	return costBound(cfg.AuditInterval, cfg.AuditCostFactor, s.lastReadCost, 30*cfg.AuditInterval)
}

// due reports whether a read is due at now.
func (s *scheduler) due(now time.Time, busy bool, cfg Config) bool {
	if s.lastRead.IsZero() || !s.hinted.IsZero() {
		return true
	}
	if s.freshChange && now.Sub(s.lastRead) >= s.costFloor(cfg) {
		// A new change: look right away (once per change burst), so T2 is not
		// overstated when kube-proxy programmed it before our watch delivered it
		// — but no more often than the read's cost allows: a burst of
		// deliveries must not read an expensive table ten times a second.
		return true
	}
	return now.Sub(s.lastRead) >= s.interval(busy, cfg)
}

// wait is how long the loop may sleep, sinceRead after the last read.
func (s *scheduler) wait(sinceRead time.Duration, busy bool, cfg Config) time.Duration {
	iv := s.interval(busy, cfg)
	if s.freshChange {
		iv = s.costFloor(cfg)
	}
	if w := iv - sinceRead; w >= time.Millisecond {
		return w
	}
	return time.Millisecond
}

// hint records a change event time for the next read (the earliest one).
func (s *scheduler) hint(at time.Time) {
	if s.hinted.IsZero() || at.Before(s.hinted) {
		s.hinted = at
	}
}

// startRead takes the hint for a read starting at now: the change event's
// time, when earlier, is the precise observation time (T2).
func (s *scheduler) startRead(now time.Time) (obsAt, hinted time.Time) {
	obsAt, hinted = now, s.hinted
	if !hinted.IsZero() && hinted.Before(obsAt) {
		obsAt = hinted
	}
	s.hinted, s.freshChange = time.Time{}, false
	return obsAt, hinted
}
