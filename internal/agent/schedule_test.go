package agent

import (
	"testing"
	"time"
)

// TestPollIntervalWithEvents: while change events flow the pending poll is
// EventPoll; without them FastPoll; an expensive read slows either.
func TestPollIntervalWithEvents(t *testing.T) {
	cfg := DefaultConfig()
	s := scheduler{}
	if got := s.pollInterval(cfg); got != cfg.FastPoll {
		t.Errorf("no events: %v, want FastPoll %v", got, cfg.FastPoll)
	}
	s.events = true
	if got := s.pollInterval(cfg); got != cfg.EventPoll {
		t.Errorf("events: %v, want EventPoll %v", got, cfg.EventPoll)
	}
	s.lastReadCost = 100 * time.Millisecond
	if got := s.pollInterval(cfg); got != 2*time.Second {
		t.Errorf("100 ms read: %v, want 2s (20x its cost)", got)
	}
}

// TestFreshChangeReadBoundedByCost: a delivery reads at once when reads are
// cheap, but an expensive read (iptables-legacy at scale) is not repeated
// for every delivery of a burst.
func TestFreshChangeReadBoundedByCost(t *testing.T) {
	cfg := DefaultConfig()
	now := time.Unix(1000, 0)
	s := scheduler{lastRead: now.Add(-150 * time.Millisecond), freshChange: true, lastReadCost: time.Millisecond}
	if !s.due(now, true, cfg) {
		t.Error("cheap read, fresh change 150 ms after the last read: want a read now")
	}
	s.lastReadCost = 40 * time.Millisecond // floor 800 ms
	if s.due(now, true, cfg) {
		t.Error("40 ms read, fresh change 150 ms after the last one: want no read before 800 ms")
	}
	if w := s.wait(now, true, cfg); w != 650*time.Millisecond {
		t.Errorf("wait %v, want 650ms", w)
	}
}

// TestIdleAuditBoundedByCost: a cheap read audits every AuditInterval; a
// read costing 300 ms (iptables-legacy at 100k endpoints) every 30 s.
func TestIdleAuditBoundedByCost(t *testing.T) {
	cfg := DefaultConfig()
	s := scheduler{lastReadCost: time.Millisecond}
	if got := s.interval(false, cfg); got != cfg.AuditInterval {
		t.Errorf("cheap read: %v, want %v", got, cfg.AuditInterval)
	}
	s.lastReadCost = 300 * time.Millisecond
	if got := s.interval(false, cfg); got != 30*time.Second {
		t.Errorf("300 ms read: %v, want 30s", got)
	}
}

// TestFreshChangeBatchedWithEvents: while change events flow, the deliveries
// of a burst share one read ChangeBatch after the last one; polling, a
// cheap read follows each delivery at once.
func TestFreshChangeBatchedWithEvents(t *testing.T) {
	cfg := DefaultConfig()
	now := time.Unix(1000, 0)
	s := scheduler{lastRead: now.Add(-100 * time.Millisecond), freshChange: true, lastReadCost: time.Millisecond, events: true}
	if s.due(now, true, cfg) {
		t.Error("events, fresh change 100 ms after the last read: want no read before ChangeBatch")
	}
	if w := s.wait(now, true, cfg); w != cfg.ChangeBatch-100*time.Millisecond {
		t.Errorf("wait %v, want %v", w, cfg.ChangeBatch-100*time.Millisecond)
	}
	if !s.due(now.Add(cfg.ChangeBatch), true, cfg) {
		t.Error("events, fresh change ChangeBatch after the last read: want a read")
	}
	s.events = false
	if !s.due(now, true, cfg) {
		t.Error("polling, fresh change 100 ms after a cheap read: want a read now")
	}
}

// TestStartReadDatesByEvents: with change events the state a read finds has
// held since the earliest event after the last read, or the last event
// before it; polling, the read (or the event that triggered it) dates it.
func TestStartReadDatesByEvents(t *testing.T) {
	now := time.Unix(1000, 0)
	ev1, ev2 := now.Add(-900*time.Millisecond), now.Add(-300*time.Millisecond)
	s := scheduler{events: true}
	s.noteEvent(ev1)
	s.noteEvent(ev2)
	if at, since := s.startRead(now); !at.Equal(now) || !since.Equal(ev1) {
		t.Errorf("two events since the last read: at %v since %v, want %v and the earliest %v", at, since, now, ev1)
	}
	later := now.Add(time.Second)
	if at, since := s.startRead(later); !at.Equal(later) || !since.Equal(ev2) {
		t.Errorf("no event since the last read: at %v since %v, want %v and the last event %v", at, since, later, ev2)
	}
	p := scheduler{}
	if at, since := p.startRead(now); !at.Equal(now) || !since.Equal(now) {
		t.Errorf("polling: at %v since %v, want both %v", at, since, now)
	}
	p.noteEvent(ev2)
	if at, since := p.startRead(now); !at.Equal(ev2) || !since.Equal(ev2) {
		t.Errorf("polling, after an event: at %v since %v, want both the event %v", at, since, ev2)
	}
}
