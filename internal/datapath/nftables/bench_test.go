package nftables

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
)

// nftCPU returns the CPU time (user+system) used so far by this process
// (who=RUSAGE_SELF) or its finished children (RUSAGE_CHILDREN). Benchmarks
// report it because wall time on a shared, loaded machine says little.
func nftCPU(who int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nftReportCPU reports CPU milliseconds per operation since the given start.
func nftReportCPU(b *testing.B, self0, children0 time.Duration) {
	n := float64(b.N) * 1e6
	b.ReportMetric(float64(nftCPU(syscall.RUSAGE_SELF)-self0)/n, "cpu-ms/op")
	if c := nftCPU(syscall.RUSAGE_CHILDREN) - children0; c > 0 {
		b.ReportMetric(float64(c)/n, "child-cpu-ms/op")
	}
}

// Sizes: the reference figures (docs/architecture.md, "Reading cost") are at
// 1,000 services / 10,000 endpoints.
var (
	nftGenSmall = nftGenSpec{services: 50, endpoints: 3, affinityEvery: 7, nodePortEvery: 5, emptyEvery: 9}
	nftGen10k   = nftGenSpec{services: 1000, endpoints: 10, affinityEvery: 10, nodePortEvery: 10, emptyEvery: 50}
	nftGen100k  = nftGenSpec{services: 10000, endpoints: 10, affinityEvery: 10, nodePortEvery: 10, emptyEvery: 50}
)

// TestNFTGeneratedTable checks the generator's JSON against nft's own
// rendering of the generated text and the live netlink read of it.
func TestNFTGeneratedTable(t *testing.T) {
	obs, err := ParseJSON(nftGenSmall.json(), nil, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	// 50 cluster IPs (5 of them rejected) + node ports of non-empty services.
	wantNP := 0
	for _, s := range nftGenSmall.list() {
		if s.nodePort != 0 && !s.empty {
			wantNP++
		}
	}
	if len(obs.Frontends) != 50+wantNP || len(obs.Warnings) != 0 {
		t.Fatalf("%d frontends (want %d), warnings %q", len(obs.Frontends), 50+wantNP, obs.Warnings)
	}
	ns := nftTestNetns(t)
	path := filepath.Join(t.TempDir(), "gen.nft")
	if err := os.WriteFile(path, []byte(nftGenSmall.text()), 0o644); err != nil {
		t.Fatal(err)
	}
	nftIn(t, ns, "nft", "-f", path)
	nftSameObserved(t, "generated JSON vs nft's dump", obs, nftOffline(t, nftDump(t, ns, "ip"), nil, model.Hints{}))
	nftSameObserved(t, "generated JSON vs live", obs, nftLive(t, ns, model.Hints{}))
}

func benchParse(b *testing.B, g nftGenSpec) {
	data := g.json()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	self0, ch0 := nftCPU(syscall.RUSAGE_SELF), nftCPU(syscall.RUSAGE_CHILDREN)
	for b.Loop() {
		if _, err := ParseJSON(data, nil, model.Hints{}); err != nil {
			b.Fatal(err)
		}
	}
	nftReportCPU(b, self0, ch0)
}

// BenchmarkParseNFTJSON10k: 1,000 services, 10,000 endpoints.
func BenchmarkParseNFTJSON10k(b *testing.B) { benchParse(b, nftGen10k) }

// BenchmarkParseNFTJSON100k: 10,000 services, 100,000 endpoints.
func BenchmarkParseNFTJSON100k(b *testing.B) { benchParse(b, nftGen100k) }

// nftBenchNetns loads a generated table into a fresh namespace (root only).
func nftBenchNetns(b *testing.B, g nftGenSpec) string {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root: loads the table into a network namespace")
	}
	name := "nd-dp-bench-" + filepath.Base(b.Name())
	_ = exec.Command("ip", "netns", "del", name).Run()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		b.Fatalf("ip netns add: %v: %s", err, out)
	}
	b.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	path := filepath.Join(b.TempDir(), "gen.nft")
	if err := os.WriteFile(path, []byte(g.text()), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "exec", name, "nft", "-f", path).CombinedOutput(); err != nil {
		b.Fatalf("nft -f: %v: %s", err, out)
	}
	return name
}

// BenchmarkNFTLiveSnapshot10k reads 1,000 services / 10,000 endpoints over
// netlink and parses them (the live Source).
func BenchmarkNFTLiveSnapshot10k(b *testing.B) {
	ns := nftBenchNetns(b, nftGen10k)
	src := &Reader{Config: Config{NetNS: ns}}
	self0, ch0 := nftCPU(syscall.RUSAGE_SELF), nftCPU(syscall.RUSAGE_CHILDREN)
	for b.Loop() {
		obs, err := src.Snapshot(context.Background())
		if err != nil || len(obs.Frontends) < 1000 {
			b.Fatalf("%v, %d frontends", err, len(obs.Frontends))
		}
	}
	nftReportCPU(b, self0, ch0)
}

// BenchmarkNFTExecDump10k is the alternative the reader rejected: spawning
// `nft -j list table` (what knftables does) and parsing its JSON.
func BenchmarkNFTExecDump10k(b *testing.B) {
	ns := nftBenchNetns(b, nftGen10k)
	self0, ch0 := nftCPU(syscall.RUSAGE_SELF), nftCPU(syscall.RUSAGE_CHILDREN)
	for b.Loop() {
		out, err := exec.Command("ip", "netns", "exec", ns, "nft", "-j", "list", "table", "ip", "kube-proxy").Output()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ParseJSON(out, nil, model.Hints{}); err != nil {
			b.Fatal(err)
		}
	}
	nftReportCPU(b, self0, ch0)
}

// BenchmarkNFTLiveSnapshotUnchanged10k: a Snapshot when nothing changed
// since the last read (one generation query, then the cached tables).
func BenchmarkNFTLiveSnapshotUnchanged10k(b *testing.B) {
	ns := nftBenchNetns(b, nftGen10k)
	src := &Reader{Config: Config{NetNS: ns}}
	if _, err := src.Snapshot(context.Background()); err != nil {
		b.Fatal(err)
	}
	self0, ch0 := nftCPU(syscall.RUSAGE_SELF), nftCPU(syscall.RUSAGE_CHILDREN)
	for b.Loop() {
		if _, err := src.Snapshot(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	nftReportCPU(b, self0, ch0)
	if src.fullReads != 1 {
		b.Fatalf("%d full reads", src.fullReads)
	}
}

// BenchmarkNFTLiveUpdate10k: one endpoint of one service changes (kube-proxy
// rewrites the service chain); the agent applies the event. Only the agent's
// own CPU counts (cpu-ms/op); the nft command making the change is a child.
func BenchmarkNFTLiveUpdate10k(b *testing.B) { benchLiveUpdate(b, nftGen10k) }

// BenchmarkNFTLiveUpdate100k: the same at 10,000 services / 100,000
// endpoints: the cost of a change must not grow with the table.
func BenchmarkNFTLiveUpdate100k(b *testing.B) { benchLiveUpdate(b, nftGen100k) }

func benchLiveUpdate(b *testing.B, spec nftGenSpec) {
	ns := nftBenchNetns(b, spec)
	src := &Reader{Config: Config{NetNS: ns}}
	defer src.Close()
	if _, err := src.Snapshot(context.Background()); err != nil {
		b.Fatal(err)
	}
	// The watcher carries the kube-proxy tables' messages, as the agent's
	// (datapath.WatchChanges): the reader patches from them (live_ops.go).
	w, err := nfevents.WatchWith(context.Background(), ns, nfevents.Options{OpTables: KubeProxyTables})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	// Update's own CPU (this thread: user and kernel time of its requests),
	// apart from the process's (watcher, GC, the nft commands' start).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	chain := spec.list()[3].chain("service-")
	i := 0
	change := func(reread bool) time.Duration {
		i++
		script := fmt.Sprintf("flush chain ip kube-proxy %s\nadd rule ip kube-proxy %s meta l4proto tcp dnat to 10.250.0.%d:8080\n", chain, chain, i%250)
		cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("nft: %v: %s", err, out)
		}
		ev := <-w.Events()
		if reread {
			ev.Ops, ev.OpsComplete = nil, false
		}
		t0 := nftCPU(nftRusageThread)
		obs, err := src.Update(context.Background(), ev)
		d := nftCPU(nftRusageThread) - t0
		if err != nil || len(obs.Frontends) < 1000 {
			b.Fatalf("%v, %d frontends", err, len(obs.Frontends))
		}
		return d
	}
	var upd time.Duration
	runtime.GC() // the full read's garbage: not the changes' cost
	self0, ch0 := nftCPU(syscall.RUSAGE_SELF), nftCPU(syscall.RUSAGE_CHILDREN)
	for b.Loop() {
		upd += change(false)
	}
	nftReportCPU(b, self0, ch0)
	b.ReportMetric(float64(upd)/float64(b.N)/1e6, "update-cpu-ms/op")
	if src.fullReads != 1 || src.opFallbacks != 0 || src.opPatches != b.N {
		b.Fatalf("%d full reads, %d events patched, %d read instead", src.fullReads, src.opPatches, src.opFallbacks)
	}
	// For comparison, the same change applied by re-reading what the event
	// names (the path of events without their messages), after the timed loop.
	const rereads = 20
	var rd time.Duration
	runtime.GC()
	for range rereads {
		rd += change(true)
	}
	b.ReportMetric(float64(rd)/rereads/1e6, "reread-update-cpu-ms/op")
}

// nftRusageThread is RUSAGE_THREAD: the calling thread's usage.
const nftRusageThread = 1
