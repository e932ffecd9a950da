package runtimetune

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
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
		if got := PercentFor(c.live, 50); got != c.want {
			t.Errorf("%s: PercentFor(%d MiB) = %d, want %d", c.about, c.live/mib, got, c.want)
		}
	}
	// Headroom never shrinks as the live heap grows (no cliff at the knee).
	prev := uint64(0)
	for live := uint64(mib); live < 1<<30; live += mib {
		h := Headroom(live, 50)
		if h < prev {
			t.Fatalf("headroom at %d MiB live (%d) is below that at one MiB less (%d)", live/mib, h, prev)
		}
		prev = h
	}
}

// TestGCTunerRetunes runs the tuner in this process: after a collection of
// a small heap the percent is raised above the base, and a heap made large
// (kept live, past the knee) brings it below the base.
func TestGCTunerRetunes(t *testing.T) {
	if !inChild(t) {
		return
	}
	g := StartTuner(50)
	waitPercent(t, g, func(p int) bool { return p > 50 }, "above the base for a small heap")

	big := make([][]byte, 64)
	for i := range big {
		big[i] = make([]byte, 1<<20)
		big[i][0] = byte(i)
	}
	// 64 MiB and the test's own heap: 24 MiB + 1/16 of what is past 48 MiB, 35-38 %.
	waitPercent(t, g, func(p int) bool { return p >= 30 && p < 50 }, "30-49 % with 64 MiB live")
	runtime.KeepAlive(big)
	if got := debug.SetGCPercent(-1); got != g.Percent() {
		t.Errorf("the runtime's percent is %d, the floor says %d", got, g.Percent())
	}
}

func waitPercent(t *testing.T, g *Tuner, ok func(int) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the finalizer goroutine runs the tuner
		if ok(g.Percent()) {
			return
		}
	}
	t.Fatalf("GC percent %d after 10 s of collections, want %s", g.Percent(), what)
}

// childEnv marks the test process that runs one test alone (inChild).
const childEnv = "RUNTIMETUNE_TEST_CHILD"

// inChild runs the calling test alone in a child process of the test
// binary and reports false; in that child it reports true and the test
// runs. A tuner runs for the rest of its process: started in a child, it
// cannot retune the collections of the other tests.
func inChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s in a child process: %v\n%s", t.Name(), err, out)
	}
	return false
}
