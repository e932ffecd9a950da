package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live  uint64
		want  int
		about string
	}{
		{0, 50, "nothing measured yet: the base"},
		{8 << 20, 400, "a nearly empty heap: capped"},
		{32 << 20, 100, "32 MiB live: 32 MiB of headroom is 100 %"},
		{64 << 20, 50, "at twice the floor the base takes over"},
		{600 << 20, 50, "a large heap keeps the base"},
	} {
		if got := gcPercentFor(c.live, 50, 32<<20); got != c.want {
			t.Errorf("%s: gcPercentFor(%d MiB) = %d, want %d", c.about, c.live>>20, got, c.want)
		}
	}
}

// TestGCFloorRetunes runs the floor in this process: after a collection of a
// small heap the percent is raised above the base, and a heap made large
// (kept live) brings it back to the base.
func TestGCFloorRetunes(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	g := startGCFloor(50, 16<<20)
	defer g.stop()
	waitPercent(t, g, func(p int) bool { return p > 50 }, "above the base for a small heap")

	big := make([][]byte, 48)
	for i := range big {
		big[i] = make([]byte, 1<<20)
		big[i][0] = byte(i)
	}
	waitPercent(t, g, func(p int) bool { return p == 50 }, "the base with 48 MiB live")
	runtime.KeepAlive(big)
	if got := debug.SetGCPercent(-1); got != int(g.current.Load()) {
		t.Errorf("the runtime's percent is %d, the floor says %d", got, g.current.Load())
	}
}

func waitPercent(t *testing.T, g *gcFloor, ok func(int) bool, what string) {
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
