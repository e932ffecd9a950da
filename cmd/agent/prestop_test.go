package main

import (
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/drift"
)

func TestRecommendPreStop(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	sample := func(kind drift.ChangeKind, t0, t2 time.Duration) drift.LagSample {
		return drift.LagSample{Kind: kind, T0: now.Add(-time.Minute), T1: now.Add(-time.Minute + t0/2),
			T2: now.Add(-time.Minute + t2)}
	}
	if _, ok := recommendPreStop(nil, now, 30*time.Minute); ok {
		t.Fatal("recommendation without samples")
	}
	s := []drift.LagSample{
		sample(drift.ChangeRemove, 0, 2*time.Second),
		sample(drift.ChangeRemove, 0, 4*time.Second),
		sample(drift.ChangeAdd, 0, 30*time.Second), // additions do not count
	}
	got, ok := recommendPreStop(s, now, 30*time.Minute)
	// p99 of {2s,4s} = 4s; 4*1.2+1 = 5.8 -> 6
	if !ok || got != 6 {
		t.Fatalf("got %v %v, want 6", got, ok)
	}
	old := drift.LagSample{Kind: drift.ChangeRemove, T0: now.Add(-2 * time.Hour), T1: now.Add(-2 * time.Hour), T2: now.Add(-2*time.Hour + 50*time.Second)}
	if got, _ := recommendPreStop(append(s, old), now, 30*time.Minute); got != 6 {
		t.Fatalf("samples outside the window counted: %v", got)
	}
}
