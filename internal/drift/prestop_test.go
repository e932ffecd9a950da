package drift

import (
	"testing"
	"time"
)

func TestRecommendPreStop(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	sample := func(kind ChangeKind, t0, t2 time.Duration) LagSample {
		return LagSample{Kind: kind, T0: now.Add(-time.Minute), T1: now.Add(-time.Minute + t0/2),
			T2: now.Add(-time.Minute + t2)}
	}
	if _, ok := RecommendPreStop(nil, now, PreStopWindow); ok {
		t.Fatal("recommendation without samples")
	}
	s := []LagSample{
		sample(ChangeRemove, 0, 2*time.Second),
		sample(ChangeRemove, 0, 4*time.Second),
		sample(ChangeAdd, 0, 30*time.Second), // additions do not count
	}
	got, ok := RecommendPreStop(s, now, PreStopWindow)
	// p99 of {2s,4s} = 4s; 4*1.2+1 = 5.8 -> 6
	if !ok || got != 6 {
		t.Fatalf("got %v %v, want 6", got, ok)
	}
	old := LagSample{Kind: ChangeRemove, T0: now.Add(-2 * time.Hour), T1: now.Add(-2 * time.Hour), T2: now.Add(-2*time.Hour + 50*time.Second)}
	if got, _ := RecommendPreStop(append(s, old), now, PreStopWindow); got != 6 {
		t.Fatalf("samples outside the window counted: %v", got)
	}
	// No trigger time: T2-T1 stands in.
	noT0 := LagSample{Kind: ChangeRemove, T1: now.Add(-time.Minute), T2: now.Add(-time.Minute + 9*time.Second)}
	if got, _ := RecommendPreStop([]LagSample{noT0}, now, PreStopWindow); got != 12 { // 9*1.2+1 = 11.8
		t.Fatalf("without T0: %v, want 12", got)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for p, want := range map[float64]time.Duration{0.5: 3, 0.9: 5, 0.99: 5, 0.2: 1, 0.01: 1} {
		if got := Percentile(ds, p); got != want {
			t.Errorf("Percentile(%v) = %v, want %v", p, got, want)
		}
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("Percentile of nothing is not 0")
	}
}
