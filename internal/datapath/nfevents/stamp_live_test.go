package nfevents

import (
	"fmt"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/bpf"
)

// TestStamperDatesByTheKernel: with the socket filter attached, commits
// whose notifications are read 300 ms late are each dated within
// themselves (real commits in a fresh namespace), not at their read; a
// generation it did not stamp has no stamp.
func TestStamperDatesByTheKernel(t *testing.T) {
	ns := nftTestNetns(t)
	c := nftEventConn(t, ns)
	g0, err := Generation(ns)
	if err != nil {
		t.Fatal(err)
	}
	s, err := attachStamper(c, g0)
	if err != nil {
		t.Fatalf("attach the stamp filter (the kernel has BPF and this test runs as root): %v", err)
	}
	defer s.close()
	r, err := newDatagramReader(c)
	if err != nil {
		t.Fatal(err)
	}
	// Two commits 200 ms apart, read 300 ms after the second: each is
	// dated within itself (the second not by the first's datagrams).
	var before, after [2]time.Time
	for i := range before {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		before[i] = time.Now()
		nftIn(t, ns, "nft", "add", "table", "ip", fmt.Sprintf("nd-stamp-%d", i))
		after[i] = time.Now()
	}
	time.Sleep(300 * time.Millisecond)
	for i := range before {
		gen := readNewGen(t, r)
		read := time.Now()
		if gen != g0+1+uint32(i) {
			t.Fatalf("NEWGEN %d for commit %d from generation %d", gen, i, g0)
		}
		at, ok := s.stamp(gen)
		if !ok {
			t.Fatalf("no stamp for commit %d", i)
		}
		const slack = 5 * time.Millisecond // the two clocks are read one after the other (slower under TCG)
		if at.Before(before[i].Add(-slack)) || at.After(after[i].Add(slack)) {
			t.Errorf("commit %d stamped %v after it began, want within it (%v)", i, at.Sub(before[i]), after[i].Sub(before[i]))
		}
		if read.Sub(at) < 250*time.Millisecond {
			t.Errorf("commit %d stamped only %v before its read 300 ms later: dated by the read?", i, read.Sub(at))
		}
	}
	gen := g0 + 2
	for _, g := range []uint32{gen + 1, gen - 2, gen + stampSlots} {
		if _, ok := s.stamp(g); ok {
			t.Errorf("generation %d (commits up to %d stamped) has a stamp", g, gen)
		}
	}
}

// readNewGen reads datagrams up to a NEWGEN and returns its generation.
func readNewGen(t *testing.T, r *datagramReader) uint32 {
	t.Helper()
	for i := 0; i < 10; i++ {
		b, err := r.read()
		if err != nil {
			t.Fatal(err)
		}
		var gen *uint32
		if err := eachMessage(b, func(m netlink.Message) {
			if _, g, ok, err := parseChangeMessage(m); err == nil && ok && g != nil {
				gen = &g.ID
			}
		}); err != nil {
			t.Fatal(err)
		}
		if gen != nil {
			return *gen
		}
	}
	t.Fatal("no NEWGEN in 10 datagrams")
	return 0
}

// TestWatcherDatesByTheKernel: the change watcher attaches the filter and
// dates a commit's event within the commit.
func TestWatcherDatesByTheKernel(t *testing.T) {
	ns := nftTestNetns(t)
	_, w := nftLiveWatch(t, ns)
	kernel, _, _, err := w.Dating()
	if !kernel {
		t.Fatalf("watcher dates by its reads: %v", err)
	}
	before := time.Now()
	nftIn(t, ns, "nft", "add", "table", "ip", "nd-stamp-w")
	after := time.Now()
	ev := nftWaitEvent(t, w, func(ev Event) bool { return len(ev.Changes) > 0 })
	if ev.Received.Before(before.Add(-5*time.Millisecond)) || ev.Received.After(after.Add(5*time.Millisecond)) {
		t.Errorf("event dated %v after the commit began, want within the commit (%v)", ev.Received.Sub(before), after.Sub(before))
	}
	if _, stamped, _, _ := w.Dating(); stamped == 0 {
		t.Error("no transaction dated by the kernel's stamp")
	}
}

// TestMonoToWall: a monotonic reading converts to the wall clock within
// a millisecond; future and too old readings are refused.
func TestMonoToWall(t *testing.T) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	want := time.Now().Add(-50 * time.Millisecond)
	got, ok := bpf.KtimeToWall(uint64(ts.Nano()-int64(50*time.Millisecond)), time.Second)
	if !ok || got.Sub(want).Abs() > time.Millisecond {
		t.Errorf("50 ms ago: got %v ok=%v, want within 1 ms of %v", got, ok, want)
	}
	if _, ok := bpf.KtimeToWall(uint64(ts.Nano()+int64(time.Hour)), time.Second); ok {
		t.Error("a reading an hour ahead was accepted")
	}
	if _, ok := bpf.KtimeToWall(uint64(ts.Nano()-int64(2*time.Second)), time.Second); ok {
		t.Error("a reading older than maxAge was accepted")
	}
}
