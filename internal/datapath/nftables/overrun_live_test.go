package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// TestNFTLiveOverrunRereadsEverything: a burst of commits overruns a
// shrunken netlink receive buffer. The kernel's drop (ENOBUFS) is counted,
// reaches the reader as a lost-events notice, and the reader's next
// observation is a full read that equals a fresh reader's, with the
// burst's last endpoint change in it.
func TestNFTLiveOverrunRereadsEverything(t *testing.T) {
	ns, opts, src, _ := nftLiveWorkerB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The smallest buffer the kernel allows: a few datagrams.
	w, err := nfevents.WatchWith(ctx, ns, nfevents.Options{ReadBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const chain = "service-EEISWTY7-shop/legacy/tcp/tcp"
	last := ""
	// Endpoint changes, each followed by a large commit in a table of its
	// own, until the kernel drops notifications: a reader woken at every
	// datagram may keep pace for a while on an idle machine.
	for i := 0; i < 40 && w.Overruns() == 0; i++ {
		last = fmt.Sprintf("10.214.1.%d:2525", 100+i)
		nftRewriteChain(t, ns, chain, last)
		netnstest.RunInput(t, ns, burstTable(i, 300, 10), "nft", "-f", "-")
	}
	if w.Overruns() == 0 {
		t.Fatal("no overrun after 40 bursts of 3,000 rules into a minimal receive buffer")
	}
	t.Logf("kernel overruns counted: %d", w.Overruns())
	full := src.fullReads
	var got model.Observed
	sawLost := false
	for !sawLost {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("events ended: %v", w.Err())
			}
			if got, err = src.Update(ctx, ev); err != nil {
				t.Fatal(err)
			}
			sawLost = ev.Lost
		case <-time.After(10 * time.Second):
			t.Fatal("no lost-events notice within 10 s of the overrun")
		}
	}
	if src.fullReads == full {
		t.Error("the lost-events notice did not make a full read")
	}
	nftSameObserved(t, "after the overrun vs a fresh reader", got, nftLive(t, ns, opts))
	legacy := got.Frontends[model.NewFrontend(netip.MustParseAddr("10.97.34.204"), 25, model.TCP, model.ClusterIP)]
	if len(legacy.Backends) != 1 || legacy.Backends[0] != netip.MustParseAddrPort(last) {
		t.Errorf("after the overrun the reader has %v, want the burst's last change %s", legacy.Backends, last)
	}
}

// burstTable is one transaction creating table ip nd-burst-<n> with
// chains chains of rules rules each: thousands of notifications.
func burstTable(n, chains, rules int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip nd-burst-%d {\n", n)
	for c := range chains {
		fmt.Fprintf(&b, "\tchain c%d {\n", c)
		for r := range rules {
			fmt.Fprintf(&b, "\t\tip daddr 10.%d.%d.%d counter\n", c/250, c%250, r)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}
