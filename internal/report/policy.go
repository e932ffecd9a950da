package report

import (
	"errors"
	"fmt"
	"time"
)

// Policy says when a report is written: when its change key differs from
// the last written one, at most once per MinInterval, and at least once per
// Heartbeat.
type Policy struct {
	Heartbeat   time.Duration
	MinInterval time.Duration
	MaxFindings int
}

// DefaultPolicy is the agent's default (the write load it causes is
// computed in docs/architecture.md, "Node reports").
func DefaultPolicy() Policy {
	return Policy{Heartbeat: 2 * time.Minute, MinInterval: time.Minute, MaxFindings: 20}
}

// Validate says what is wrong with a policy, naming the flags.
func (p Policy) Validate() error {
	var errs []error
	if p.Heartbeat < 10*time.Second {
		errs = append(errs, fmt.Errorf("--node-report-heartbeat must be at least 10s, not %s", p.Heartbeat))
	}
	if p.MinInterval < time.Second {
		errs = append(errs, fmt.Errorf("--node-report-min-interval must be at least 1s, not %s", p.MinInterval))
	}
	if p.MinInterval > p.Heartbeat {
		errs = append(errs, fmt.Errorf("--node-report-min-interval (%s) must not exceed --node-report-heartbeat (%s)", p.MinInterval, p.Heartbeat))
	}
	if p.MaxFindings < 0 || p.MaxFindings > 200 {
		errs = append(errs, fmt.Errorf("--node-report-max-findings must be between 0 and 200 (the report stays small), not %d", p.MaxFindings))
	}
	return errors.Join(errs...)
}

// Reason is why a write is due.
type Reason string

const (
	NotDue    Reason = ""
	First     Reason = "first"
	Changed   Reason = "changed"
	Heartbeat Reason = "heartbeat"
)

// Written is what the publisher last wrote: its key and when.
type Written struct {
	Key string
	At  time.Time
}

// Due says whether a report with key is to be written at now, given the last
// write (zero: none yet), and when to look again at the latest.
func (p Policy) Due(now time.Time, key string, last Written) (Reason, time.Time) {
	switch {
	case last.At.IsZero():
		return First, now
	case key != last.Key:
		if next := last.At.Add(p.MinInterval); now.Before(next) {
			return NotDue, next
		}
		return Changed, now
	case !now.Before(last.At.Add(p.Heartbeat)):
		return Heartbeat, now
	}
	return NotDue, last.At.Add(p.Heartbeat)
}
