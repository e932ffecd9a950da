//go:build linux

package iptables_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"github.com/netdrift/netdrift/internal/watch"
)

// keepNS names a namespace BenchmarkNFTReaderFull reuses: restored into
// on first use and left in place (delete it with `ip netns del`), so that
// profiling runs at 100k do not pay the restore each time.
var keepNS = flag.String("nftreader.ns", "", "BenchmarkNFTReaderFull: reuse (or create and keep) this namespace")

// BenchmarkNFTReaderFull: the start-up full read alone (a fresh reader's
// first Snapshot: every chain and rule read, decoded, parsed and walked)
// next to iptables-nft-save -t nat + -t filter of the same table in the
// same iteration (skipped with -nftreader.nosave). full-ms and nftsave-ms
// are CPU from rusage; peak-heap-MiB is the largest heap (live objects and
// garbage not yet collected) sampled during the read over the live heap
// before it, at the GOGC the test runs with; live-heap-MiB what the reader
// keeps after it (the same over a GC); alloc-MiB what the read allocated.
func BenchmarkNFTReaderFull(b *testing.B) {
	for _, sc := range []struct {
		name string
		spec bench.Spec
	}{{"10k", bench.Scale10k}, {"100k", bench.Scale100k}} {
		b.Run(sc.name, func(b *testing.B) { benchNFTReaderFull(b, sc.name, sc.spec) })
	}
}

func benchNFTReaderFull(b *testing.B, scale string, s bench.Spec) {
	ns := fullBenchNS(b, scale, s)
	hints := model.HintsFor(watch.Expected(bench.NodeName, s.ClusterState()))
	var ref, full time.Duration
	var peak, live float64
	var allocs uint64
	timedOut := false
	n := 0
	for b.Loop() {
		cpu, late := nftSaveBoth(b, ns)
		ref, timedOut = ref+cpu, timedOut || late
		var obs model.Observed
		var err error
		var p float64
		var nr *iptables.NFTReader
		runtime.GC()
		base, a0 := heapObjects(), heapAllocs()
		full += cpuOf(func() {
			p = peakHeapOf(func() {
				nr = &iptables.NFTReader{NetNS: ns}
				obs, err = nr.Snapshot(context.Background(), hints)
			})
		})
		if err != nil || len(obs.Frontends) < s.Services {
			b.Fatalf("full read: %v, %d frontends", err, len(obs.Frontends))
		}
		allocs += heapAllocs() - a0
		runtime.GC()
		heapKept = nr // live at the GC above
		peak, live = max(peak, p), max(live, mibOver(heapObjects(), base))
		heapKept = nil
		n++
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(n) / 1e6 }
	b.ReportMetric(ms(full), "full-ms")
	b.ReportMetric(peak, "peak-heap-MiB")
	b.ReportMetric(live, "live-heap-MiB")
	b.ReportMetric(float64(allocs)/float64(n)/(1<<20), "alloc-MiB")
	if !*noNFTSave {
		b.ReportMetric(ms(ref), "nftsave-ms")
		b.ReportMetric(float64(full)/float64(ref), "full/nftsave")
	}
	if timedOut {
		b.ReportMetric(1, "ref-timed-out")
	}
}

// fullBenchNS is a namespace holding the scale's table: a fresh one, or
// -nftreader.ns (restored only when it does not exist yet).
func fullBenchNS(b *testing.B, scale string, s bench.Spec) string {
	netnstest.RequireRoot(b, "loads generated tables into a network namespace")
	for _, tool := range []string{"iptables-nft-restore", "iptables-nft-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not installed", tool)
		}
	}
	if *keepNS == "" {
		ns := netnstest.New(b, "nd-nlfull")
		netnstest.RunInput(b, ns, s.IPTablesRestore(), "iptables-nft-restore")
		return ns
	}
	ns := *keepNS + "-" + scale
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
		return ns
	}
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		b.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	netnstest.RunInput(b, ns, s.IPTablesRestore(), "iptables-nft-restore")
	return ns
}

// heapObjects is the heap's object bytes (live and not yet collected).
func heapObjects() uint64 { return readMetric("/memory/classes/heap/objects:bytes") }

// heapAllocs is the bytes allocated on the heap so far.
func heapAllocs() uint64 { return readMetric("/gc/heap/allocs:bytes") }

func readMetric(name string) uint64 {
	sample := []metrics.Sample{{Name: name}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

func mibOver(v, base uint64) float64 { return float64(int64(v)-int64(base)) / (1 << 20) }

// peakHeapOf runs fn and returns the largest heap it reached (sampled
// every millisecond) over the live heap before it, in MiB.
func peakHeapOf(fn func()) float64 {
	runtime.GC()
	base := heapObjects()
	var top uint64
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			top = max(top, heapObjects())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	fn()
	close(done)
	wg.Wait()
	return mibOver(max(top, heapObjects()), base)
}
