package nfevents

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/netdrift/netdrift/internal/nsutil"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"golang.org/x/sys/unix"
)

// nftTestNetns creates a fresh network namespace, deleted at cleanup; it
// skips the test when not root.
func nftTestNetns(t *testing.T) string {
	t.Helper()
	netnstest.RequireRoot(t, "creates network namespaces and loads nftables rules in them")
	return netnstest.New(t, "nd-nfev")
}

// nftIn runs a command inside the namespace and returns its stdout.
func nftIn(t *testing.T, ns string, args ...string) []byte {
	t.Helper()
	return netnstest.Run(t, ns, args...)
}

// nftEventConn is a NETLINK_NETFILTER socket in ns that joined the
// nf_tables notification group, closed at the test's end.
func nftEventConn(t *testing.T, ns string) *netlink.Conn {
	t.Helper()
	var c *netlink.Conn
	if err := nsutil.WithFd(ns, func(fd int) error {
		var err error
		c, err = netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: fd})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.JoinGroup(nfnlGroupNFTables); err != nil {
		t.Fatal(err)
	}
	return c
}

// natOpsWatch is a fresh namespace, where the restore input before (if
// any) is committed first, and a watcher there carrying the ip nat table's
// ops (closed at the test's end).
func natOpsWatch(t *testing.T, before string) (string, *Watcher) {
	t.Helper()
	ns := nftTestNetns(t)
	if _, err := exec.LookPath("iptables-nft-restore"); err != nil {
		t.Skip("iptables-nft-restore not installed")
	}
	if before != "" {
		netnstest.RunInput(t, ns, before, "iptables-nft-restore", "--noflush")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := WatchWith(ctx, ns, Options{OpTables: []TableRef{{"ip", "nat"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return ns, w
}

// nftWaitEvent returns the first event match accepts, failing the test
// after 5 s without one.
func nftWaitEvent(t *testing.T, w *Watcher, match func(Event) bool) Event {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("event channel closed: %v", w.Err())
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatal("no matching nftables event within 5s")
		}
	}
}

// nftLiveWatch subscribes to ns's change events for the rest of the test.
func nftLiveWatch(t *testing.T, ns string) (context.Context, *Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := Watch(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return ctx, w
}
