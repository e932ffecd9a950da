package iptables

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// TestNFTReaderOverrunRereadsEverything: kube-proxy's iptables-nft rules
// change in a burst of commits that overruns a shrunken netlink receive
// buffer. The kernel's drop (ENOBUFS) is counted and reaches the reader as
// a lost-events notice; the reader drops its cache, and its next
// observation is a full read equal to one parsed from iptables-nft-save,
// every flushed chain in it.
func TestNFTReaderOverrunRereadsEverything(t *testing.T) {
	requireNFT(t, false)
	ns := restoreFixture(t, "worker-a.iptables-save", "")
	nr := crossCheck(t, ns, false, model.Hints{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := nr.Snapshot(ctx, model.Hints{}); err != nil {
		t.Fatal(err)
	}
	w, err := nfevents.WatchWith(ctx, ns, nfevents.Options{ReadBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rules := readTestdata(t, "worker-a.iptables-save")
	// An endpoint chain flushed, then a large commit in a table of its own,
	// until the kernel drops notifications.
	for i := 0; i < 10 && w.Overruns() == 0; i++ {
		netnstest.Run(t, ns, "iptables-nft", "-t", "nat", "-F", firstMatch(t, rules, "-A KUBE-SEP-", 2*i+1))
		netnstest.RunInput(t, ns, burst(i, 300, 10), "nft", "-f", "-")
	}
	if w.Overruns() == 0 {
		t.Fatal("no overrun after 10 bursts of 3,000 rules into a minimal receive buffer")
	}
	full := nr.Stats().FullReads
	for lost := false; !lost; {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("events ended: %v", w.Err())
			}
			if err := nr.ApplyEvent(ctx, ev); err != nil {
				t.Fatal(err)
			}
			lost = ev.Lost
		case <-time.After(10 * time.Second):
			t.Fatal("no lost-events notice within 10 s of the overrun")
		}
	}
	got, err := nr.Snapshot(ctx, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	if nr.Stats().FullReads == full {
		t.Error("the lost-events notice did not make the next read a full one")
	}
	want, err := Parse(Dumps{IPv4: nftSave(t, ns, false)}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	assertSameObserved(t, got, want)
}

// burst is one transaction creating table ip nd-burst-<n> with chains
// chains of rules rules each: thousands of notifications.
func burst(n, chains, rules int) string {
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
