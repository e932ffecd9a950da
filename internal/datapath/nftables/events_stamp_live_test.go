package nftables

import (
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/netdrift/netdrift/internal/nsutil"
	"golang.org/x/sys/unix"
)

// TestStamperDatesByTheKernel: with the socket filter attached, a
// notification read 300 ms after its commit is dated within the commit
// (a real commit in a fresh namespace), not at its read; its stamp is
// taken once.
func TestStamperDatesByTheKernel(t *testing.T) {
	ns := nftTestNetns(t)
	var c *netlink.Conn
	if err := nsutil.WithFd(ns, func(fd int) error {
		var err error
		c, err = netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: fd})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := attachStamper(c)
	if err != nil {
		t.Fatalf("attach the stamp filter (the kernel has BPF and this test runs as root): %v", err)
	}
	defer s.close()
	if err := c.JoinGroup(nfnlGroupNFTables); err != nil {
		t.Fatal(err)
	}
	r, err := newDatagramReader(c)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	nftIn(t, ns, "nft", "add", "table", "ip", "nd-stamp")
	after := time.Now()
	time.Sleep(300 * time.Millisecond)
	b, err := r.read()
	if err != nil {
		t.Fatal(err)
	}
	read := time.Now()
	at, ok := s.stamp(b)
	if !ok {
		t.Fatal("no stamp for the commit's first datagram")
	}
	const slack = 2 * time.Millisecond // the two clocks are read one after the other
	if at.Before(before.Add(-slack)) || at.After(after.Add(slack)) {
		t.Errorf("stamped %v after the commit began, want within the commit (%v)", at.Sub(before), after.Sub(before))
	}
	if read.Sub(at) < 250*time.Millisecond {
		t.Errorf("stamp only %v before the read 300 ms later: dated by the read?", read.Sub(at))
	}
	if _, ok := s.stamp(b); ok {
		t.Error("the same datagram's stamp was taken twice")
	}
}

// TestWatcherDatesByTheKernel: the change watcher attaches the filter and
// dates a commit's event within the commit.
func TestWatcherDatesByTheKernel(t *testing.T) {
	ns := nftTestNetns(t)
	_, w := nftLiveWatch(t, ns)
	kernel, err, _, _ := w.Dating()
	if !kernel {
		t.Fatalf("watcher dates by its reads: %v", err)
	}
	before := time.Now()
	nftIn(t, ns, "nft", "add", "table", "ip", "nd-stamp-w")
	after := time.Now()
	ev := nftWaitEvent(t, w, func(ev ChangeEvent) bool { return len(ev.Changes) > 0 })
	if ev.Received.Before(before.Add(-2*time.Millisecond)) || ev.Received.After(after.Add(2*time.Millisecond)) {
		t.Errorf("event dated %v after the commit began, want within the commit (%v)", ev.Received.Sub(before), after.Sub(before))
	}
	if _, _, stamped, _ := w.Dating(); stamped == 0 {
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
	got, ok := monoToWall(uint64(ts.Nano()-int64(50*time.Millisecond)), time.Second)
	if !ok || got.Sub(want).Abs() > time.Millisecond {
		t.Errorf("50 ms ago: got %v ok=%v, want within 1 ms of %v", got, ok, want)
	}
	if _, ok := monoToWall(uint64(ts.Nano()+int64(time.Hour)), time.Second); ok {
		t.Error("a reading an hour ahead was accepted")
	}
	if _, ok := monoToWall(uint64(ts.Nano()-int64(2*time.Second)), time.Second); ok {
		t.Error("a reading older than maxAge was accepted")
	}
}
