package iptables

import (
	"errors"
	"testing"
	"time"
)

// TestPathState: a failure streak keeps the time of its first failure and
// the latest reason; the path is tried again once its retry is due; a read
// that serves ends the fallback, and the next streak dates anew.
func TestPathState(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	var p pathState
	if p.inForce() || !p.usable(t0) {
		t.Fatalf("zero value: %+v, want a path in use", p)
	}
	p.failed(errors.New("first"), t0, t0.Add(time.Minute))
	p.failed(errors.New("second"), t0.Add(time.Second), t0.Add(2*time.Minute))
	if !p.inForce() || p.off != "second" || !p.since.Equal(t0) {
		t.Fatalf("after two failures: %+v, want the second reason since the first failure", p)
	}
	if p.usable(t0.Add(time.Minute)) || !p.usable(t0.Add(2*time.Minute)) {
		t.Fatalf("retry: usable before it is due, or not when due: %+v", p)
	}
	p.succeeded()
	if p.inForce() || !p.usable(t0) {
		t.Fatalf("after a read that served: %+v", p)
	}
	p.failed(errors.New("third"), t0.Add(time.Hour), t0.Add(2*time.Hour))
	if !p.since.Equal(t0.Add(time.Hour)) {
		t.Fatalf("a new streak since %v, want %v", p.since, t0.Add(time.Hour))
	}
}
