//go:build linux

package iptables_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"github.com/netdrift/netdrift/internal/watch"
)

// heapOf is the live heap fn leaves behind (after a GC), in MiB.
func heapOf(fn func()) (inuse, live float64) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	fn()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	return float64(int64(m1.HeapInuse)-int64(m0.HeapInuse)) / (1 << 20), float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / (1 << 20)
}

var heapKept *iptables.NFTReader

// BenchmarkNFTReaderHeap: the heap a netlink reader keeps after a full read
// and walk of the generated tables (heap-inuse-MiB: HeapInuse after a GC,
// heap-live-MiB: HeapAlloc after a GC, both over the same before the read).
func BenchmarkNFTReaderHeap(b *testing.B) {
	for _, sc := range []struct {
		name string
		spec bench.Spec
	}{{"10k", bench.Scale10k}, {"100k", bench.Scale100k}} {
		b.Run(sc.name, func(b *testing.B) {
			netnstest.RequireRoot(b, "loads generated tables into a fresh network namespace")
			ns := netnstest.New(b, "nd-nlheap")
			netnstest.RunInput(b, ns, sc.spec.IPTablesRestore(), "iptables-nft-restore")
			hints := model.HintsFor(watch.Expected(bench.NodeName, sc.spec.ClusterState()))
			var inuse, live float64
			for b.Loop() {
				var nr *iptables.NFTReader
				inuse, live = heapOf(func() {
					nr = &iptables.NFTReader{NetNS: ns}
					if _, err := nr.Snapshot(context.Background(), hints); err != nil {
						b.Fatal(err)
					}
				})
				heapKept = nr // live at the end: a -memprofile shows what it holds
			}
			b.ReportMetric(inuse, "heap-inuse-MiB")
			b.ReportMetric(live, "heap-live-MiB")
		})
	}
}
