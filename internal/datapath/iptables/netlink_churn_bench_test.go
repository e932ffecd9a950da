//go:build linux

package iptables_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"github.com/netdrift/netdrift/internal/watch"
)

// churnRig replaces endpoints one after another in kube-proxy-shaped
// iptables-nft tables, as kube-proxy's partial sync writes one service's
// change: KUBE-SERVICES and the service's KUBE-SVC chain written again, a
// KUBE-SEP chain for the new endpoint, the old one deleted. The iptables
// mode the agent uses follows from the change events.
type churnRig struct {
	tb       testing.TB
	ns       string
	services []bench.Service // with endpoints, as they are now
	entry    []string        // nat KUBE-SERVICES's rules
	w        *nfevents.Watcher
	mode     *iptables.Mode
	next     int // the next new endpoint's number
}

func newChurnRig(tb testing.TB, spec bench.Spec) *churnRig {
	tb.Helper()
	netnstest.RequireRoot(tb, "loads generated tables into a fresh network namespace")
	r := &churnRig{tb: tb, ns: netnstest.New(tb, "nd-churn")}
	text := spec.IPTablesRestore()
	netnstest.RunInput(tb, r.ns, text, "iptables-nft-restore")
	for _, v := range spec.List() {
		if len(v.Endpoints) > 0 {
			r.services = append(r.services, v)
		}
	}
	nat := text[strings.Index(text, "*nat\n"):]
	for _, l := range strings.Split(nat, "\n") {
		if strings.HasPrefix(l, "-A KUBE-SERVICES ") {
			r.entry = append(r.entry, l)
		}
	}
	r.w = watchIPTables(tb, r.ns)
	r.mode = iptables.OpenMode(r.ns)
	r.mode.SetHints(model.HintsFor(watch.Expected(bench.NodeName, spec.ClusterState())))
	if _, err := r.mode.Snapshot(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return r
}

// change replaces one endpoint of the i-th service (cycling) by a new
// address and brings the mode up to date: its events applied, a snapshot
// taken (the agent reads after each change).
func (r *churnRig) change(i int) {
	r.tb.Helper()
	v := &r.services[i%len(r.services)]
	e := (i / len(r.services)) % len(v.Endpoints)
	old := v.Endpoints[e]
	n := r.next
	r.next++
	v.Endpoints[e] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 200 + byte(n>>16), byte(n >> 8), byte(n)}), 8080)
	netnstest.RunInput(r.tb, r.ns, r.syncText(*v, old), "iptables-nft-restore", "--noflush")
	r.catchUp()
	if _, err := r.mode.Snapshot(context.Background()); err != nil {
		r.tb.Fatal(err)
	}
}

// syncText is kube-proxy's partial sync of v after endpoint old left it.
func (r *churnRig) syncText(v bench.Service, old netip.AddrPort) string {
	name := iptables.KubeProxyPortName(v.Port)
	svc := "KUBE-SVC-" + iptables.ChainHash(v.Port)
	sep := func(ep netip.AddrPort) string { return "KUBE-SEP-" + iptables.EndpointChainHash(v.Port, ep.String()) }
	var b strings.Builder
	b.WriteString("*nat\n:KUBE-SERVICES - [0:0]\n")
	fmt.Fprintf(&b, ":%s - [0:0]\n", svc)
	for _, ep := range v.Endpoints {
		fmt.Fprintf(&b, ":%s - [0:0]\n", sep(ep))
	}
	fmt.Fprintf(&b, ":%s - [0:0]\n", sep(old))
	for _, l := range r.entry {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(&b, "-A %s ! -s 10.128.0.0/9 -d %s/32 -p tcp -m comment --comment \"%s cluster IP\" -m tcp --dport 80 -j KUBE-MARK-MASQ\n", svc, v.ClusterIP, name)
	for i, ep := range v.Endpoints {
		if left := len(v.Endpoints) - i; left > 1 {
			fmt.Fprintf(&b, "-A %s -m statistic --mode random --probability %.11f -j %s\n", svc, 1/float64(left), sep(ep))
		} else {
			fmt.Fprintf(&b, "-A %s -j %s\n", svc, sep(ep))
		}
		fmt.Fprintf(&b, "-A %s -s %s/32 -j KUBE-MARK-MASQ\n", sep(ep), ep.Addr())
		fmt.Fprintf(&b, "-A %s -p tcp -m tcp -j DNAT --to-destination %s\n", sep(ep), ep)
	}
	fmt.Fprintf(&b, "-X %s\nCOMMIT\n", sep(old))
	return b.String()
}

// catchUp applies every event up to the kernel's current generation.
func (r *churnRig) catchUp() {
	r.tb.Helper()
	untilCurrent(r.tb, r.ns, r.w, func(ev nfevents.Event) {
		if err := r.mode.ApplyChange(context.Background(), ev); err != nil {
			r.tb.Fatal(err)
		}
	})
}

// liveHeap is the heap in use after a GC, in MiB; with
// NETDRIFT_HEAP_PROFILES set to a directory, a heap profile is written
// there as name.pprof (compare two with go tool pprof -diff_base).
func liveHeap(tb testing.TB, name string) float64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	if dir := os.Getenv("NETDRIFT_HEAP_PROFILES"); dir != "" {
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err != nil {
			tb.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			tb.Fatal(err)
		}
	}
	return float64(m.HeapAlloc) / (1 << 20)
}

// BenchmarkNFTChurnHeap: the live heap of the iptables mode (the netlink
// reader patched from change events, a snapshot after each change) over a
// long run of endpoint replacements at 2,000 endpoints (200 services: each
// change rewrites KUBE-SERVICES, as kube-proxy does, and that costs the
// kernel time in proportion). heap-MiB is the live heap after a warm-up of
// 1,000 changes, which replace every endpoint half a time;
// growth-KiB/1k-changes is what the next 3,000 add, per 1,000. Run with
// -benchtime=1x (one run is the whole series):
// go test -run '^$' -bench NFTChurnHeap -benchtime=1x ./internal/datapath/iptables/
func BenchmarkNFTChurnHeap(b *testing.B) {
	const warm, run = 1000, 3000
	spec := bench.Spec{Services: 200, Endpoints: 10, NodePortEvery: 10, EmptyEvery: 50}
	for b.Loop() {
		r := newChurnRig(b, spec)
		for i := range warm {
			r.change(i)
		}
		h0 := liveHeap(b, "churn-warm")
		for i := range run {
			r.change(warm + i)
		}
		h1 := liveHeap(b, "churn-end")
		b.ReportMetric(h0, "heap-MiB")
		b.ReportMetric((h1-h0)*1024/(run/1000), "growth-KiB/1k-changes")
		runtime.KeepAlive(r)
	}
}
