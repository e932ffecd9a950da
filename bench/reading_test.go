package bench

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/datapath/nftables"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

// The benchmarks interleave the reference (the tool any reader must run)
// and netdrift's read in every iteration, so both see the same background
// load, and report CPU time (user+system, from rusage) per operation:
// wall time on a shared machine is mostly waiting for a core.
// Reference commands run under `ip netns exec` like netdrift's own; the
// cost of that wrapper alone is reported as netns-exec-ms.

var scales = []struct {
	name string
	spec Spec
}{{"10k", Scale10k}, {"100k", Scale100k}}

// BenchmarkIPTables: iptables-save -t nat + -t filter (reference) vs
// ParseIPTables on the same text vs the live IPTables.Snapshot (which runs
// the same two dumps, then parses).
func BenchmarkIPTables(b *testing.B) {
	for _, sc := range scales {
		for _, backend := range []string{iptables.BackendNFT, iptables.BackendLegacy} {
			b.Run(sc.name+"/"+backend, func(b *testing.B) { benchIPTables(b, sc.spec, backend) })
		}
	}
}

func benchIPTables(b *testing.B, s Spec, backend string) {
	ns := loadIPTables(b, s, backend)
	opts := model.HintsFor(watch.Expected(NodeName, s.ClusterState()))
	src := &iptables.Reader{Config: iptables.Config{NetNS: ns, Backend: backend}}
	src.SetHints(opts)
	save := "iptables-" + backend + "-save"
	var dump, parse, snap, exec, floor time.Duration
	var bytes int
	n := 0
	for b.Loop() {
		nat, c1 := run(b, ns, "", save, "-t", "nat")
		filter, c2 := run(b, ns, "", save, "-t", "filter")
		_, c3 := run(b, ns, "", "true")
		dump, exec = dump+c1+c2, exec+c3
		text := append(nat, filter...)
		bytes = len(text)
		var obs model.Observed
		var err error
		parse += selfCPU(func() { obs, err = iptables.Parse(iptables.Dumps{IPv4: text}, opts) })
		checkObserved(b, s, obs, err)
		snap += selfCPU(func() { obs, err = src.Snapshot(context.Background()) })
		checkObserved(b, s, obs, err)
		floor += selfCPU(func() {})
		n++
	}
	b.ReportMetric(ms(dump, n), "dump-ms")
	b.ReportMetric(ms(parse, n), "parse-ms")
	b.ReportMetric(ms(snap, n), "snapshot-ms")
	b.ReportMetric(ms(exec, n), "netns-exec-ms")
	b.ReportMetric(ms(floor, n), "gc-floor-ms")
	b.ReportMetric(float64(parse)/float64(dump), "parse/dump")
	b.ReportMetric(float64(snap)/float64(dump), "snapshot/dump")
	b.ReportMetric(float64(bytes)/1e6, "dump-MB")
}

// BenchmarkNFTables: `nft -j list table ip kube-proxy` (reference: what
// knftables runs) vs netdrift's live netlink read of the same table (a
// fresh reader: full read), the O(1) generation check, and a Snapshot when
// nothing changed (generation check + copy of the cached result).
func BenchmarkNFTables(b *testing.B) {
	for _, sc := range scales {
		b.Run(sc.name, func(b *testing.B) { benchNFT(b, sc.spec) })
	}
}

func benchNFT(b *testing.B, s Spec) {
	ns := loadNFT(b, s)
	opts := model.HintsFor(watch.Expected(NodeName, s.ClusterState()))
	cached := &nftables.Reader{Config: nftables.Config{NetNS: ns, Hints: opts}}
	if _, err := cached.Snapshot(context.Background()); err != nil {
		b.Fatal(err)
	}
	const genReps, unchangedReps = 100, 10
	var ref, parse, live, gen, unchanged, exec, floor time.Duration
	var bytes int
	n := 0
	for b.Loop() {
		out, c := run(b, ns, "", "nft", "-j", "list", "table", "ip", "kube-proxy")
		_, c2 := run(b, ns, "", "true")
		ref, exec, bytes = ref+c, exec+c2, len(out)
		var obs model.Observed
		var err error
		parse += selfCPU(func() { obs, err = nftables.ParseJSON(out, nil, opts) })
		checkObserved(b, s, obs, err)
		live += selfCPU(func() {
			fresh := &nftables.Reader{Config: nftables.Config{NetNS: ns, Hints: opts}}
			obs, err = fresh.Snapshot(context.Background())
		})
		checkObserved(b, s, obs, err)
		gen += selfCPU(func() {
			for range genReps {
				if _, err := nfevents.Generation(ns); err != nil {
					b.Fatal(err)
				}
			}
		})
		unchanged += selfCPU(func() {
			for range unchangedReps {
				obs, err = cached.Snapshot(context.Background())
			}
		})
		checkObserved(b, s, obs, err)
		floor += selfCPU(func() {})
		n++
	}
	b.ReportMetric(ms(ref, n), "nft-j-ms")
	b.ReportMetric(ms(exec, n), "netns-exec-ms")
	b.ReportMetric(ms(parse, n), "parse-json-ms")
	b.ReportMetric(ms(live, n), "live-full-ms")
	b.ReportMetric(ms(gen, n*genReps)*1e3, "generation-us")
	b.ReportMetric(ms(unchanged, n*unchangedReps), "unchanged-ms")
	b.ReportMetric(ms(floor, n), "gc-floor-ms")
	b.ReportMetric(float64(live)/float64(ref), "live/nft-j")
	b.ReportMetric(float64(gen)/genReps/float64(ref), "generation/nft-j")
	b.ReportMetric(float64(unchanged)/unchangedReps/float64(ref), "unchanged/nft-j")
	b.ReportMetric(float64(bytes)/1e6, "json-MB")
}

// BenchmarkDesired: watch.Expected for the whole cluster, one service's
// ExpectedService (the per-change cost), the agent's per-audit merge of the
// per-service desired maps, and drift.Compare, against ParseIPTables of the
// node's table in the same loop.
func BenchmarkDesired(b *testing.B) {
	for _, sc := range scales {
		b.Run(sc.name, func(b *testing.B) { benchDesired(b, sc.spec) })
	}
}

func benchDesired(b *testing.B, s Spec) {
	cs := s.ClusterState()
	text := []byte(s.IPTablesRestore())
	opts := model.HintsFor(watch.Expected(NodeName, cs))
	perSvc := map[string]map[model.Frontend]model.Verdict{}
	node := cs.Nodes[0]
	for i, svc := range cs.Services {
		perSvc[svc.Namespace+"/"+svc.Name] = watch.ExpectedService(node, NodeName, svc, cs.EndpointSlices[i:i+1])
	}
	const svcReps = 100
	var expected, oneSvc, merge, compare, parse, floor time.Duration
	n := 0
	for b.Loop() {
		var want model.Desired
		expected += selfCPU(func() { want = watch.Expected(NodeName, cs) })
		oneSvc += selfCPU(func() {
			for i := range svcReps {
				if len(watch.ExpectedService(node, NodeName, cs.Services[i], cs.EndpointSlices[i:i+1])) == 0 {
					b.Fatal("no frontends")
				}
			}
		})
		merge += selfCPU(func() {
			d := model.Desired{Node: NodeName, Frontends: map[model.Frontend]model.Verdict{}}
			for _, m := range perSvc {
				maps.Copy(d.Frontends, m)
			}
			want = d
		})
		var obs model.Observed
		var err error
		parse += selfCPU(func() { obs, err = iptables.Parse(iptables.Dumps{IPv4: text}, opts) })
		checkObserved(b, s, obs, err)
		var found []model.Finding
		compare += selfCPU(func() { found = drift.Compare(want, obs) })
		if len(found) != 0 {
			b.Fatalf("%d findings on a drift-free node, first %+v", len(found), found[0])
		}
		floor += selfCPU(func() {})
		n++
	}
	b.ReportMetric(ms(expected, n), "expected-ms")
	b.ReportMetric(ms(oneSvc, n*svcReps)*1e3, "expected-1svc-us")
	b.ReportMetric(ms(merge, n), "merge-ms")
	b.ReportMetric(ms(compare, n), "compare-ms")
	b.ReportMetric(ms(parse, n), "parse-ms")
	b.ReportMetric(ms(floor, n), "gc-floor-ms")
	b.ReportMetric(float64(expected)/float64(parse), "expected/parse")
	b.ReportMetric(float64(compare)/float64(parse), "compare/parse")
}

// checkObserved fails unless obs holds every frontend of the spec: a cluster
// IP per service and a node port per node-port service.
func checkObserved(b *testing.B, s Spec, obs model.Observed, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	want := 0
	for _, v := range s.List() {
		want++
		if v.NodePort != 0 {
			want++
		}
	}
	if len(obs.Frontends) != want {
		b.Fatalf("%d frontends, want %d (warnings %q)", len(obs.Frontends), want, obs.Warnings)
	}
}
