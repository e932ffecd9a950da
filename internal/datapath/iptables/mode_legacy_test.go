package iptables

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// TestIPTablesLegacyReadsInProcess: OpenMode's reader, in auto mode on
// a namespace whose kube-proxy rules are in iptables-legacy, detects the
// backend with iptables-save once, then reads in process (no
// iptables-legacy-save); an unchanged read returns the same observation
// (same Version); a change is seen; a KUBE-* rule it cannot decode makes it
// read with iptables-legacy-save, with the reason in the warnings, and the
// answer is the save path's.
func TestIPTablesLegacyReadsInProcess(t *testing.T) {
	netnstest.RequireRoot(t, "restores iptables-legacy rules into a fresh network namespace")
	for _, tool := range []string{"ip", "iptables-legacy-restore", "iptables-legacy", "iptables-legacy-save"} {
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
	if out, err := netnstest.Cmd(ns, "iptables-legacy-restore").CombinedOutput(); err != nil {
		t.Skipf("kernel lacks ip_tables: %v: %s", err, out)
	}
	netnstest.RunInput(t, ns, rules, "iptables-legacy-restore")
	if names, _ := nsutil.ReadProcNet(ns, "ip6_tables_names"); names == "" {
		netnstest.RunInput(t, ns, "*nat\nCOMMIT\n*filter\nCOMMIT\n", "ip6tables-legacy-restore")
	}
	src := OpenMode(ns)
	ctx := context.Background()
	first, err := src.Snapshot(ctx) // auto: iptables-save detects legacy
	if err != nil || len(first.Frontends) != 1 || src.r.Stats().Backend != BackendLegacy {
		t.Fatalf("first read: %v, %d frontends, backend %q", err, len(first.Frontends), src.r.Stats().Backend)
	}
	dumpAt := src.r.Stats().At
	second, err := src.Snapshot(ctx)
	if err != nil || src.r.Stats().At != dumpAt || src.LastReadCPU() != 0 || src.lg.lr.Stats().Reads != 1 {
		t.Fatalf("second read not in process: err %v, dump at %v (was %v), legacy stats %+v", err, src.r.Stats().At, dumpAt, src.lg.lr.Stats())
	}
	if src.dumps != nil || len(src.obs.Frontends) != 0 {
		t.Error("the iptables-save path's dump and parse are still kept after the in-process reader took over")
	}
	if src.Evented() {
		t.Fatal("iptables-legacy reported as described by nf_tables change events: the agent would poll too slowly")
	}
	if !sameVerdicts(first, second) || !slices.Equal(first.Warnings, second.Warnings) {
		t.Fatalf("in-process read differs from iptables-legacy-save:\n%+v\n%+v", first, second)
	}
	third, err := src.Snapshot(ctx)
	if err != nil || third.Version != second.Version || src.lg.lr.Stats().Unchanged != 1 {
		t.Fatalf("unchanged read: err %v, version %d -> %d, stats %+v", err, second.Version, third.Version, src.lg.lr.Stats())
	}
	src.SetHints(model.Hints{})
	if h, err := src.Snapshot(ctx); err != nil || h.Version == third.Version {
		t.Fatalf("new hints: err %v, same version %d", err, h.Version)
	}
	netnstest.Run(t, ns, "iptables-legacy", "-t", "nat", "-F", "KUBE-SVC-AAAAAAAAAAAAAAAA")
	after, err := src.Snapshot(ctx)
	if err != nil || after.Version == third.Version || src.r.Stats().At != dumpAt {
		t.Fatalf("change: err %v, version %d (was %d), dump at %v", err, after.Version, third.Version, src.r.Stats().At)
	}
	for fe, v := range after.Frontends {
		if len(v.Backends) != 0 {
			t.Fatalf("flushed chain still has backends: %s %+v", fe, v)
		}
	}
	// A rule the decoder does not know, in a KUBE-* chain: fall back.
	netnstest.Run(t, ns, "iptables-legacy", "-t", "nat", "-A", "KUBE-SERVICES", "-m", "u32", "--u32", "0>>22&0x3C@4=0x29", "-j", "RETURN")
	fb, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if src.r.Stats().At == dumpAt || src.LastReadCPU() == 0 || !slices.ContainsFunc(fb.Warnings, func(w string) bool {
		return strings.Contains(w, "read with iptables-legacy-save instead") && strings.Contains(w, `"u32"`)
	}) {
		t.Fatalf("no fallback to iptables-legacy-save with a reason: warnings %q", fb.Warnings)
	}
	want, err := Parse(Dumps{IPv4: save(t, ns, "iptables-legacy-save"), IPv6: save(t, ns, "ip6tables-legacy-save")}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	if !sameVerdicts(fb, want) {
		t.Fatalf("fallback answer is not iptables-legacy-save's:\n%+v\n%+v", fb.Frontends, want.Frontends)
	}
}

func save(t *testing.T, ns, bin string) []byte {
	var out []byte
	for _, table := range []string{"nat", "filter"} {
		out = append(out, netnstest.Run(t, ns, bin, "-t", table)...)
	}
	return out
}

func sameVerdicts(a, b model.Observed) bool {
	if len(a.Frontends) != len(b.Frontends) {
		return false
	}
	for f, v := range a.Frontends {
		w, ok := b.Frontends[f]
		if !ok || v.Action != w.Action || !slices.Equal(v.Backends, w.Backends) || !slices.Equal(v.Evidence, w.Evidence) {
			return false
		}
	}
	return true
}
