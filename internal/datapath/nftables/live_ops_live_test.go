package nftables

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// nftOpsFixture loads the small generated table into a fresh namespace and
// returns a reader that has read it and a watcher carrying the kube-proxy
// tables' messages (maxOpBytes 0: the default bound).
func nftOpsFixture(t *testing.T, maxOpBytes int) (string, *Reader, *nfevents.Watcher) {
	t.Helper()
	ns := nftTestNetns(t)
	path := filepath.Join(t.TempDir(), "gen.nft")
	if err := os.WriteFile(path, []byte(nftGenSmall.text()), 0o644); err != nil {
		t.Fatal(err)
	}
	nftIn(t, ns, "nft", "-f", path)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := nfevents.WatchWith(ctx, ns, nfevents.Options{OpTables: KubeProxyTables, MaxOpBytes: maxOpBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r := &Reader{Config: Config{NetNS: ns}}
	t.Cleanup(func() { r.Close() })
	if _, err := r.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	return ns, r, w
}

// nftOpsStep commits script in one transaction, applies its event and
// checks the result against a full read of a new reader. It returns the
// kernel requests the update made.
func nftOpsStep(t *testing.T, ns string, r *Reader, w *nfevents.Watcher, what, script string) int {
	t.Helper()
	netnstest.RunInput(t, ns, script, "nft", "-f", "-")
	ev := nftWaitEvent(t, w, func(ev nfevents.Event) bool { return ev.TouchesTable("ip", nftTableName) })
	before := r.kernelReads
	got, err := r.Update(context.Background(), ev)
	if err != nil {
		t.Fatalf("%s: update: %v", what, err)
	}
	nftSameObserved(t, what, got, nftLive(t, ns, model.Hints{}))
	return r.kernelReads - before
}

// kube-proxy-like transactions on the generated table (nftGenSmall):
// service 7 uses affinity (endpoint chains, an anonymous vmap), service 3
// an anonymous dnat map, service 20 has a node port.
func nftOpsScripts() []struct{ what, script string } {
	svcs := nftGenSmall.list()
	s7, s3, s10 := svcs[7], svcs[3], svcs[20]
	svc7 := s7.chain("service-")
	ep := func(i int) string { return s7.epChain(s7.eps[i]) }
	const kp = "ip kube-proxy "
	vmap := func(eps ...string) string {
		var parts []string
		for i, e := range eps {
			parts = append(parts, fmt.Sprintf("%d : goto %s", i, e))
		}
		return fmt.Sprintf("add rule %s%s numgen random mod %d vmap { %s }\n", kp, svc7, len(eps), strings.Join(parts, ", "))
	}
	newEP := "endpoint-test-new"
	newSvc := "service-test-new"
	svc3 := s3.chain("service-")
	return []struct{ what, script string }{
		{"endpoint added", "add chain " + kp + newEP + "\nflush chain " + kp + newEP + "\nadd rule " + kp + newEP + " meta l4proto tcp dnat to 10.250.0.1:8080\n" +
			"flush chain " + kp + svc7 + "\n" + vmap(ep(0), ep(1), ep(2), newEP)},
		{"endpoint removed", "flush chain " + kp + svc7 + "\n" + vmap(ep(0), ep(2)) +
			"flush chain " + kp + newEP + "\ndelete chain " + kp + newEP + "\n"},
		{"service added", "add chain " + kp + newSvc + "\nadd rule " + kp + newSvc + " meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.250.1.1 . 8080, 1 : 10.250.1.2 . 8080 }\n" +
			"add element " + kp + "service-ips { 10.96.9.9 . tcp . 80 : goto " + newSvc + " }\nadd element " + kp + "cluster-ips { 10.96.9.9 }\n"},
		{"service removed", "delete element " + kp + "service-ips { 10.96.9.9 . tcp . 80 }\ndelete element " + kp + "cluster-ips { 10.96.9.9 }\n" +
			"flush chain " + kp + newSvc + "\ndelete chain " + kp + newSvc + "\n"},
		{"chain flushed and rewritten", "flush chain " + kp + svc3 + "\n" +
			"add rule " + kp + svc3 + " ip saddr != 10.0.0.0/8 meta mark set meta mark | 0x4000\n" +
			"add rule " + kp + svc3 + " counter\n" +
			"add rule " + kp + svc3 + " meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.250.2.1 . 8080, 1 : 10.250.2.2 . 8080 }\n"},
		{"service loses its endpoints", fmt.Sprintf("delete element %sservice-ips { %s . tcp . 80 }\ndelete element %sservice-nodeports { tcp . %d }\n"+
			"add element %sno-endpoint-services { %s . tcp . 80 comment \"%s/%s:http\" : goto reject-chain }\n",
			kp, s10.clusterIP, kp, s10.nodePort, kp, s10.clusterIP, s10.ns, s10.name)},
		{"endpoint chain unchanged, added again", "add chain " + kp + ep(0) + "\nflush chain " + kp + ep(0) + "\n" +
			"add rule " + kp + ep(0) + " meta l4proto tcp dnat to " + s7.eps[0].String() + "\n"},
	}
}

// TestNFTUpdateFromMessages: each transaction is applied from its
// messages — no chain or set is read from the kernel — and gives what a
// full read gives.
func TestNFTUpdateFromMessages(t *testing.T) {
	ns, r, w := nftOpsFixture(t, 0)
	for _, s := range nftOpsScripts() {
		patches := r.opPatches
		if reads := nftOpsStep(t, ns, r, w, s.what, s.script); reads != 0 || r.opPatches != patches+1 {
			t.Errorf("%s: %d kernel reads, %d events patched (want 0, 1): the message path fell back (%d fallbacks)",
				s.what, reads, r.opPatches-patches, r.opFallbacks)
		}
	}
	if r.fullReads != 1 {
		t.Errorf("%d full reads, want 1", r.fullReads)
	}
}

// TestNFTUpdateIncompleteOps: past MaxOpBytes an event carries no
// messages; the reader reads what it names and stays right.
func TestNFTUpdateIncompleteOps(t *testing.T) {
	ns, r, w := nftOpsFixture(t, 100)
	for _, s := range nftOpsScripts() {
		if reads := nftOpsStep(t, ns, r, w, s.what, s.script); reads == 0 {
			t.Errorf("%s: no kernel read on an event without its messages", s.what)
		}
	}
	if r.opPatches != 0 || r.fullReads != 1 {
		t.Errorf("%d events patched, %d full reads; want 0, 1", r.opPatches, r.fullReads)
	}
}

// TestNFTUpdateOpsFallback: messages the path cannot interpret — a rule
// that looks up a named data map, a rule added after the first one was
// deleted — leave the cache as it was and read instead; a rename reads all.
func TestNFTUpdateOpsFallback(t *testing.T) {
	ns, r, w := nftOpsFixture(t, 0)
	svc3 := nftGenSmall.list()[3].chain("service-")
	const kp = "ip kube-proxy "
	nftOpsStep(t, ns, r, w, "named data map", "add map "+kp+"dm { type ipv4_addr : ipv4_addr . inet_service; elements = { 10.1.2.3 : 10.250.3.1 . 8080 } }\n"+
		"flush chain "+kp+svc3+"\nadd rule "+kp+svc3+" meta l4proto tcp dnat ip to ip saddr map @dm\n")
	if r.opFallbacks != 1 {
		t.Errorf("named data map: %d fallbacks, want 1", r.opFallbacks)
	}
	nftOpsStep(t, ns, r, w, "two rules", "flush chain "+kp+svc3+"\nadd rule "+kp+svc3+" counter\nadd rule "+kp+svc3+" meta l4proto tcp dnat to 10.250.3.2:8080\n")
	// A replace keeps the handle (DELRULE, NEWRULE of the same handle): patched.
	nftOpsStep(t, ns, r, w, "head replaced", "replace rule "+kp+svc3+" handle "+firstHandle(t, ns, svc3)+" ip saddr 10.1.1.1 counter\n")
	// The first rule deleted, a rule appended: first or last? Read.
	nftOpsStep(t, ns, r, w, "head deleted, rule added", "delete rule "+kp+svc3+" handle "+firstHandle(t, ns, svc3)+"\nadd rule "+kp+svc3+" counter\n")
	if r.opFallbacks != 2 {
		t.Errorf("head deleted, rule added: %d fallbacks, want 2", r.opFallbacks)
	}
	full := r.fullReads
	nftOpsStep(t, ns, r, w, "rename", "rename chain "+kp+svc3+" renamed-chain\n")
	if r.fullReads != full+1 {
		t.Errorf("rename: %d full reads, want %d", r.fullReads, full+1)
	}
}

// firstHandle returns the handle of a chain's first rule, as nft -a prints it.
func firstHandle(t *testing.T, ns, chain string) string {
	t.Helper()
	out := string(nftIn(t, ns, "nft", "-a", "list", "chain", "ip", nftTableName, chain))
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "# handle "); i >= 0 && !strings.Contains(l, "chain ") {
			return strings.TrimSpace(l[i+len("# handle "):])
		}
	}
	t.Fatalf("no rule in chain %s:\n%s", chain, out)
	return ""
}
