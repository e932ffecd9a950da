package nfevents

import (
	"testing"
	"time"
)

func TestCommitLogCountsTheCommitsAfterAGeneration(t *testing.T) {
	var l commitLog
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if n, first := l.after(7); n != 0 || !first.IsZero() {
		t.Fatalf("empty log: %d after 7, first %v", n, first)
	}
	for g := uint32(10); g < 15; g++ {
		l.add(g, t0.Add(time.Duration(g)*time.Second))
	}
	if n, first := l.after(12); n != 2 || !first.Equal(t0.Add(13*time.Second)) {
		t.Fatalf("after 12: %d, first %v; want 2, first at 13 s", n, first)
	}
	if n, _ := l.after(14); n != 0 {
		t.Fatalf("after the last commit: %d", n)
	}
	// Generations wrap: 2^32-1 is before 0.
	var w commitLog
	w.add(^uint32(0), t0)
	w.add(0, t0.Add(time.Second))
	if n, first := w.after(^uint32(0) - 1); n != 2 || !first.Equal(t0) {
		t.Fatalf("across the wrap: %d, first %v", n, first)
	}
	// More commits than remembered: a lower bound, dated by the oldest kept.
	var full commitLog
	for g := uint32(1); g <= commitRing+10; g++ {
		full.add(g, t0.Add(time.Duration(g)*time.Millisecond))
	}
	if n, first := full.after(0); n != commitRing || !first.Equal(t0.Add(11*time.Millisecond)) {
		t.Fatalf("overflowed log: %d, first %v", n, first)
	}
}
