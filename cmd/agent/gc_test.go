package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live  uint64
		want  int
		about string
	}{
		{0, 50, "nothing measured yet: the base"},
		{4 * mib, 400, "a nearly empty heap: capped"},
		{24 * mib, 100, "24 MiB live: the 24 MiB floor is 100 %"},
		{48 * mib, 50, "the knee, at twice the floor: the base"},
		{80 * mib, 32, "past the knee: 24 MiB + 32/16 MiB = 26 MiB of 80"},
		{128 * mib, 22, "24 MiB + 80/16 MiB = 29 MiB of 128"},
		{256 * mib, 14, "24 MiB + 208/16 MiB = 37 MiB of 256"},
		{640 * mib, 9, "24 MiB + 592/16 MiB = 61 MiB of 640"},
	} {
		if got := gcPercentFor(c.live, 50); got != c.want {
			t.Errorf("%s: gcPercentFor(%d MiB) = %d, want %d", c.about, c.live/mib, got, c.want)
		}
	}
	// Headroom never shrinks as the live heap grows (no cliff at the knee).
	prev := uint64(0)
	for live := uint64(mib); live < 1<<30; live += mib {
		h := gcHeadroom(live, 50)
		if h < prev {
			t.Fatalf("headroom at %d MiB live (%d) is below that at one MiB less (%d)", live/mib, h, prev)
		}
		prev = h
	}
}

func TestMemoryLimitFor(t *testing.T) {
	const mib = 1 << 20
	if got := memoryLimitFor(127*mib, 30*mib, 40*mib, math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("127 MiB live: limit %d MiB, want none", got/mib)
	}
	// 260 MiB live (100k endpoints, iptables-nft), its 37 MiB of headroom,
	// 60 MiB of other memory: the limit is their sum and a 64th of it.
	if got, want := memoryLimitFor(260*mib, gcHeadroom(260*mib, 50), 60*mib, math.MaxInt64), int64(260+37+60)*mib*65/64; got/mib != want/mib {
		t.Errorf("260 MiB live: limit %d MiB, want %d", got/mib, want/mib)
	}
	// $GOMEMLIMIT (the ceiling) is never raised; under it, none is set.
	if got := memoryLimitFor(260*mib, 37*mib, 60*mib, 300*mib); got != 300*mib {
		t.Errorf("ceiling 300 MiB: limit %d MiB, want the ceiling", got/mib)
	}
	if got := memoryLimitFor(100*mib, 37*mib, 60*mib, 900*mib); got != 900*mib {
		t.Errorf("100 MiB live under a 900 MiB ceiling: limit %d MiB, want the ceiling", got/mib)
	}
	// The limit is never under the heap goal and the other memory: the
	// GC percent, not the limit, sets when a collection starts.
	for live := uint64(128 * mib); live < 2<<30; live += 8 * mib {
		keep := live + gcHeadroom(live, 50) + 40*mib
		if lim := memoryLimitFor(live, gcHeadroom(live, 50), 40*mib, math.MaxInt64); uint64(lim) < keep {
			t.Fatalf("%d MiB live: limit %d MiB under the goal and other memory (%d MiB)", live/mib, lim/mib, keep/mib)
		}
	}
}

// TestGCTunerRetunes runs the tuner in this process: after a collection of
// a small heap the percent is raised above the base, and a heap made large
// (kept live, past the knee) brings it below the base.
func TestGCTunerRetunes(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	g := startGCTuner(50)
	defer g.stop()
	waitPercent(t, g, func(p int) bool { return p > 50 }, "above the base for a small heap")

	big := make([][]byte, 64)
	for i := range big {
		big[i] = make([]byte, 1<<20)
		big[i][0] = byte(i)
	}
	// 64 MiB and the test's own heap: 24 MiB + 1/16 of what is past 48 MiB, 35-38 %.
	waitPercent(t, g, func(p int) bool { return p >= 30 && p < 50 }, "30-49 % with 64 MiB live")
	runtime.KeepAlive(big)
	if got := debug.SetGCPercent(-1); got != int(g.current.Load()) {
		t.Errorf("the runtime's percent is %d, the floor says %d", got, g.current.Load())
	}
}

// TestGCTunerSetsMemoryLimit: with a live heap past gcLimitLive the tuner
// sets a memory limit above it; the limit is lifted when the test ends.
func TestGCTunerSetsMemoryLimit(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	g := startGCTuner(50)
	defer g.stop()
	big := make([][]byte, 144)
	for i := range big {
		big[i] = make([]byte, 1<<20)
		big[i][0] = byte(i)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if lim := debug.SetMemoryLimit(-1); lim < math.MaxInt64 {
			if lim < 144<<20 || lim > 1<<30 {
				t.Fatalf("memory limit %d MiB with 144 MiB live, want above it and under 1 GiB", lim>>20)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no memory limit after 10 s of collections with 144 MiB live")
		}
	}
	runtime.KeepAlive(big)
}

func waitPercent(t *testing.T, g *gcTuner, ok func(int) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the finalizer goroutine runs the tuner
		if ok(int(g.current.Load())) {
			return
		}
	}
	t.Fatalf("GC percent %d after 10 s of collections, want %s", g.current.Load(), what)
}
