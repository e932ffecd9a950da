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
