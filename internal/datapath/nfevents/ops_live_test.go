package nfevents

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

func opsText(ops []Op) string {
	var b strings.Builder
	for _, o := range ops {
		fmt.Fprintf(&b, "%s %s %s %s %s h=%d pos=%d app=%v data=%d\n", o.Family, o.Table, o.Object, o.Op, o.Chain, o.Handle, o.Position, o.Append, len(o.Data))
	}
	return b.String()
}

// TestWatcherCarriesRuleOps: an iptables-nft-restore transaction's rule
// and chain messages arrive in the event, in commit order, for the tables
// asked for and only those.
func TestWatcherCarriesRuleOps(t *testing.T) {
	three := "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -d 10.0.0.1/32 -j ACCEPT\n-A KUBE-SERVICES -d 10.0.0.2/32 -j ACCEPT\n-A KUBE-SERVICES -d 10.0.0.3/32 -j ACCEPT\nCOMMIT\n"
	ns, w := natOpsWatch(t, three+"*filter\n:X - [0:0]\nCOMMIT\n")
	ctx := context.Background()
	if rb, err := w.conn.ReadBuffer(); err != nil || rb < 32<<20 {
		t.Errorf("receive buffer %d (%v), want the 32 MiB default forced past rmem_max", rb, err)
	}
	next := func(in string) Event {
		t.Helper()
		netnstest.RunInput(t, ns, in, "iptables-nft-restore", "--noflush")
		ev := nftWaitEvent(t, w, func(ev Event) bool { return ev.TouchesTable("ip", "nat") })
		if !ev.OpsComplete {
			t.Fatalf("ops not complete:\n%s", opsText(ev.Ops))
		}
		return ev
	}
	// kube-proxy's sync of an unchanged chain: flushed, re-added; the
	// filter table (not asked for) carries nothing.
	ev := next(three + "*filter\n:X - [0:0]\n-A X -j ACCEPT\nCOMMIT\n")
	got := opsText(ev.Ops)
	if len(ev.Ops) != 6 || strings.Contains(got, "filter") || strings.Count(got, "rule del KUBE-SERVICES") != 3 ||
		strings.Count(got, "rule new KUBE-SERVICES") != 3 || ev.Ops[4].Position != ev.Ops[3].Handle || !ev.Ops[5].Append || len(ev.Ops[5].Data) == 0 {
		t.Errorf("flush + re-add: got\n%s", got)
	}
	// A chain created with a rule, then renamed: the rename is a chain
	// message naming the new name with the old chain's handle.
	ev = next("*nat\n:KUBE-B - [0:0]\n-A KUBE-B -j ACCEPT\nCOMMIT\n")
	if len(ev.Ops) != 2 || ev.Ops[0].Object != "chain" || ev.Ops[0].Op != "new" || ev.Ops[1].Chain != "KUBE-B" {
		t.Fatalf("new chain: got\n%s", opsText(ev.Ops))
	}
	h := ev.Ops[0].Handle
	netnstest.Run(t, ns, "iptables-nft", "-t", "nat", "-E", "KUBE-B", "KUBE-C")
	ev = nftWaitEvent(t, w, func(ev Event) bool { return ev.TouchesTable("ip", "nat") })
	if len(ev.Ops) != 1 || ev.Ops[0].Chain != "KUBE-C" || ev.Ops[0].Handle != h {
		t.Errorf("rename: got\n%s", opsText(ev.Ops))
	}
	// A too small MaxOpBytes: the event says its ops are incomplete.
	w2, err := WatchWith(ctx, ns, Options{OpTables: []TableRef{{"ip", "nat"}}, MaxOpBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	netnstest.RunInput(t, ns, three, "iptables-nft-restore", "--noflush")
	ev = nftWaitEvent(t, w2, func(ev Event) bool { return ev.TouchesTable("ip", "nat") })
	if ev.OpsComplete || len(ev.Ops) != 0 || len(ev.Chains("ip", "nat")) != 1 {
		t.Errorf("over MaxOpBytes: complete %v, ops\n%s", ev.OpsComplete, opsText(ev.Ops))
	}
	// A reader behind by OpsQueue events gets the chains' names only.
	w3, err := WatchWith(ctx, ns, Options{OpTables: []TableRef{{"ip", "nat"}}, OpsQueue: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Close()
	netnstest.RunInput(t, ns, three, "iptables-nft-restore", "--noflush")
	netnstest.RunInput(t, ns, three, "iptables-nft-restore", "--noflush")
	first := nftWaitEvent(t, w3, func(ev Event) bool { return ev.TouchesTable("ip", "nat") })
	second := nftWaitEvent(t, w3, func(ev Event) bool { return ev.TouchesTable("ip", "nat") })
	if !first.OpsComplete || len(first.Ops) != 6 || second.OpsComplete || len(second.Ops) != 0 {
		t.Errorf("OpsQueue 1: first %v/%d ops, second %v/%d ops", first.OpsComplete, len(first.Ops), second.OpsComplete, len(second.Ops))
	}
}
