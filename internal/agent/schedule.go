package agent

import "time"

// scheduler decides when the loop reads the datapath: at once after a new
// change or a change event, fast polls while something is pending (never
// cheaper than the last read's cost allows), the slow audit otherwise. Its
// fields are changed only by its methods; the agent calls them under its
// lock.
type scheduler struct {
	lastRead     time.Time
	lastReadCost time.Duration // CPU of the last read (wall time when unknown)
	firstEvent   time.Time     // earliest change event since the last read
	lastEvent    time.Time     // the latest change event
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

// freshFloor is the shortest interval from the last read to one for a new
// change: the cost floor, and while change events flow ChangeBatch — the
// events date the state the read finds (startRead), so a burst of
// deliveries shares one read without overstating T2.
func (s *scheduler) freshFloor(cfg Config) time.Duration {
	iv := s.costFloor(cfg)
	if s.events {
		iv = max(iv, cfg.ChangeBatch)
	}
	return iv
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
	if s.lastRead.IsZero() || !s.firstEvent.IsZero() {
		return true
	}
	if s.freshChange && now.Sub(s.lastRead) >= s.freshFloor(cfg) {
		// A new change: look right away (once per change burst), so T2 is not
		// overstated when kube-proxy programmed it before our watch delivered it
		// — but no more often than the read's cost allows: a burst of
		// deliveries must not read an expensive table ten times a second.
		return true
	}
	return now.Sub(s.lastRead) >= s.interval(busy, cfg)
}

// wait is how long the loop may sleep at now.
func (s *scheduler) wait(now time.Time, busy bool, cfg Config) time.Duration {
	sinceRead := now.Sub(s.lastRead)
	iv := s.interval(busy, cfg)
	if s.freshChange {
		iv = s.freshFloor(cfg)
	}
	if w := iv - sinceRead; w >= time.Millisecond {
		return w
	}
	return time.Millisecond
}

// restart makes the next read due at once (after the initial list).
func (s *scheduler) restart() { s.lastRead = time.Time{} }

// changed records that a desired state changed since the last read.
func (s *scheduler) changed() { s.freshChange = true }

// readCost records what the read just made cost: cpu when the reader
// measures it (a busy node inflates wall time), wall otherwise; events says
// whether nf_tables change events date the reads.
func (s *scheduler) readCost(wall, cpu time.Duration, events bool) {
	s.lastReadCost, s.events = wall, events
	if cpu > 0 {
		s.lastReadCost = cpu
	}
}

// readDone records a read that ended at now; full says it was a full audit
// (the first read counts as one).
func (s *scheduler) readDone(now time.Time, full bool) {
	s.lastRead = now
	if full || s.lastFull.IsZero() {
		s.lastFull, s.fullCost = now, s.lastReadCost
	}
}

// noteEvent records a change event time for the next read (the earliest one).
func (s *scheduler) noteEvent(at time.Time) {
	if s.firstEvent.IsZero() || at.Before(s.firstEvent) {
		s.firstEvent = at
	}
	if at.After(s.lastEvent) {
		s.lastEvent = at
	}
}

// startRead takes the change events for a read starting at now. It returns the
// read's time (changes delivered later are not judged by it), and since:
// the time from which the state the read finds held. Polling, the read
// itself dates the state, or the change event that triggered it when earlier.
// With change events describing the reader's state, that state has held
// since the earliest event after the last read — or, when none came, the
// last event before it: a change delivered meanwhile and already shown
// was programmed before the agent knew of it.
func (s *scheduler) startRead(now time.Time) (at, since time.Time) {
	first := s.firstEvent
	s.firstEvent, s.freshChange = time.Time{}, false
	if s.events {
		since = first
		if since.IsZero() {
			since = s.lastEvent
		}
		if since.IsZero() || since.After(now) {
			since = now
		}
		return now, since
	}
	at = now
	if !first.IsZero() && first.Before(at) {
		at = first
	}
	return at, at
}
