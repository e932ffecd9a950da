package iptables

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// TestIPTablesNFTUnchangedSkipsDump: with iptables-nft, an unchanged
// nf_tables generation serves the cached observation; any change forces a dump.
func TestIPTablesNFTUnchangedSkipsDump(t *testing.T) {
	netnstest.RequireRoot(t, "restores iptables-nft rules into a fresh network namespace")
	for _, tool := range []string{"ip", "iptables-nft-restore", "iptables-nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	ns := newTestNetns(t)
	rules := `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A OUTPUT -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "shop/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA
-A KUBE-SVC-AAAAAAAAAAAAAAAA -m comment --comment "shop/web:http -> 10.1.0.1:8080" -j KUBE-SEP-BBBBBBBBBBBBBBBB
-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m comment --comment "shop/web:http" -m tcp -j DNAT --to-destination 10.1.0.1:8080
COMMIT
*filter
:INPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
COMMIT
`
	netnstest.RunInput(t, ns, rules, "iptables-nft-restore")
	src := &Mode{r: &Reader{Config: Config{NetNS: ns, Backend: BackendNFT}}, netns: ns}
	ctx := context.Background()
	first, err := src.Snapshot(ctx)
	if err != nil || len(first.Frontends) != 1 {
		t.Fatalf("first read: %v, %d frontends", err, len(first.Frontends))
	}
	at := src.r.Stats().At
	if _, err := src.Snapshot(ctx); err != nil || !src.r.Stats().At.Equal(at) {
		t.Fatalf("unchanged ruleset dumped again (err %v)", err)
	}
	// New hints re-parse the cached dump: no new dump.
	src.SetHints(model.Hints{ServicePorts: []model.ServicePort{{ServiceName: model.ServiceName{Namespace: "shop", Name: "web"}, Port: "http", Protocol: model.TCP}}})
	if _, err := src.Snapshot(ctx); err != nil || !src.r.Stats().At.Equal(at) {
		t.Fatalf("new hints dumped again (err %v)", err)
	}
	netnstest.Run(t, ns, "iptables-nft", "-t", "nat", "-F", "KUBE-SVC-AAAAAAAAAAAAAAAA")
	after, err := src.Snapshot(ctx)
	if err != nil || src.r.Stats().At.Equal(at) {
		t.Fatalf("changed ruleset not dumped again (err %v)", err)
	}
	for fe, v := range after.Frontends {
		if len(v.Backends) != 0 {
			t.Fatalf("flushed chain still has backends: %s %+v", fe, v)
		}
	}
}

// TestIPTablesNFTReadsOverNetlink: OpenMode's reader reads an
// iptables-nft ruleset in process (no iptables-save), re-reads only the
// chain a change event names, and falls back to iptables-save with the
// reason when a KUBE-* rule holds a match it cannot decode.
func TestIPTablesNFTReadsOverNetlink(t *testing.T) {
	netnstest.RequireRoot(t, "restores iptables-nft rules into a fresh network namespace")
	for _, tool := range []string{"ip", "iptables-nft-restore", "iptables-nft", "iptables-nft-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	ns := newTestNetns(t)
	rules := `*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "shop/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA
-A KUBE-SVC-AAAAAAAAAAAAAAAA -m comment --comment "shop/web:http -> 10.1.0.1:8080" -j KUBE-SEP-BBBBBBBBBBBBBBBB
-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m comment --comment "shop/web:http" -m tcp -j DNAT --to-destination 10.1.0.1:8080
COMMIT
*filter
:INPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
COMMIT
`
	netnstest.RunInput(t, ns, rules, "iptables-nft-restore")
	src := OpenMode(ns)
	src.r.Config.Backend = BackendNFT // the host may have legacy tables loaded
	ctx := context.Background()
	first, err := src.Snapshot(ctx)
	if err != nil || len(first.Frontends) != 1 {
		t.Fatalf("first read: %v, %d frontends", err, len(first.Frontends))
	}
	if !src.r.Stats().At.IsZero() || src.LastReadCPU() != 0 || src.nl.Stats().FullReads != 1 {
		t.Fatalf("first read did not go over netlink: dump at %v, nl stats %+v", src.r.Stats().At, src.nl.Stats())
	}
	if !src.Evented() {
		t.Fatal("read over netlink, but not reported as described by change events")
	}
	gen := func() uint32 {
		g, err := nfevents.Generation(ns)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	event := func(chain string) nfevents.Event {
		return nfevents.Event{Generation: gen(), Changes: []nfevents.Change{{Family: "ip", Table: "nat", Object: "rule", Name: chain, Op: "new"}}}
	}
	netnstest.Run(t, ns, "iptables-nft", "-t", "nat", "-F", "KUBE-SVC-AAAAAAAAAAAAAAAA")
	if err := src.ApplyChange(ctx, event("KUBE-SVC-AAAAAAAAAAAAAAAA")); err != nil {
		t.Fatal(err)
	}
	after, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := src.nl.Stats(); st.FullReads != 1 || st.LastChains != 1 || !src.r.Stats().At.IsZero() {
		t.Fatalf("change event: nl stats %+v, dump at %v: want one chain re-read, no full read, no dump", st, src.r.Stats().At)
	}
	for fe, v := range after.Frontends {
		if len(v.Backends) != 0 {
			t.Fatalf("flushed chain still has backends: %s %+v", fe, v)
		}
	}
	// The event re-resolved the one frontend that reaches the chain, and the
	// new state says so (Since the first read, Changed: that frontend).
	if st := src.nl.Stats(); st.Walks != 1 || st.LastGroups != 1 || st.LastChanged != 1 ||
		after.Since != first.Version || len(after.Changed) != 1 || after.Version == first.Version {
		t.Fatalf("change event: nl stats %+v, version %d since %d (first %d), changed %v: want one frontend re-resolved",
			st, after.Version, after.Since, first.Version, after.Changed)
	}
	// A rule the decoder does not know, in a KUBE-* chain: fall back.
	netnstest.Run(t, ns, "iptables-nft", "-t", "nat", "-A", "KUBE-SERVICES", "-m", "u32", "--u32", "0>>22&0x3C@4=0x29", "-j", "RETURN")
	if err := src.ApplyChange(ctx, event("KUBE-SERVICES")); err == nil {
		t.Fatal("undecodable rule: ApplyChange kept its cache")
	}
	fb, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if src.r.Stats().At.IsZero() || !slices.ContainsFunc(fb.Warnings, func(w string) bool {
		return strings.Contains(w, "read with iptables-save instead") && strings.Contains(w, `"u32"`)
	}) {
		t.Fatalf("no fallback to iptables-save with a reason: warnings %q", fb.Warnings)
	}
	if from, to, why, since := src.Fallback(); from != "netlink" || to != "iptables-save" || !strings.Contains(why, `"u32"`) || since.IsZero() {
		t.Fatalf("Fallback() = %q, %q, %q, %v; want netlink -> iptables-save with the reason and since when", from, to, why, since)
	}
}
