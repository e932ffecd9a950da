package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// agentGCPercent is the agent's GC target unless GOGC is set. Its heap is
// mostly the tables it keeps (large, long-lived) and it allocates little per
// change: at the default 100 the heap may grow to twice the live tables
// before a collection, which at 100k endpoints put the agent's peak RSS above
// kube-proxy's. At 50 the headroom is halved for a few more collections of a
// heap that is mostly live (BENCHMARKS.md, "Live").
const agentGCPercent = 50

// agentGCMinHeadroom is the least garbage the agent lets accumulate between
// two collections. At 50 % of a small heap (10k endpoints: ~25-45 MiB live)
// a collection came every ~12-20 MiB allocated, which under churn made the
// collector a sixth of the agent's CPU; each cycle marks the whole live heap,
// so the GC's cost is the live heap over the headroom. The floor raises the
// percent while the live heap is below twice the floor, and leaves large
// heaps (100k endpoints, where the RSS goal binds) at agentGCPercent.
// Measured at 10k, 20 changes/s (BENCHMARKS.md, "Live"): 32 MiB put the
// iptables-nft agent's peak RSS at 0.99x kube-proxy's; 24 MiB keeps it at
// 0.93x for nearly the same CPU.
const agentGCMinHeadroom = 24 << 20

// gcPercentFor is the GC percent that gives a live heap of live bytes at
// least minHeadroom of headroom, and never less than base (capped at 400: a
// nearly empty heap at start-up).
func gcPercentFor(live uint64, base int, minHeadroom uint64) int {
	if live == 0 {
		return base
	}
	need := int(minHeadroom * 100 / live)
	return min(max(base, need), 400)
}

// gcFloor re-tunes the GC percent after every collection from the live heap
// that collection measured. It runs on the finalizer goroutine.
type gcFloor struct {
	base        int
	minHeadroom uint64
	current     atomic.Int64
	stopped     atomic.Bool
	sample      []metrics.Sample
}

func startGCFloor(base int, minHeadroom uint64) *gcFloor {
	g := &gcFloor{base: base, minHeadroom: minHeadroom,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	g.current.Store(int64(base))
	debug.SetGCPercent(base)
	g.arm()
	return g
}

// gcSentinel is garbage from birth: its finalizer runs after the next
// collection. It holds a pointer so the tiny allocator (which may keep a
// finalized object alive with its neighbours) does not take it.
type gcSentinel struct{ _ *byte }

func (g *gcFloor) arm() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		if g.stopped.Load() {
			return
		}
		g.tune()
		g.arm()
	})
}

// stop ends the re-tuning after the next collection (the percent stays).
func (g *gcFloor) stop() { g.stopped.Store(true) }

func (g *gcFloor) tune() {
	metrics.Read(g.sample)
	if g.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	pct := gcPercentFor(g.sample[0].Value.Uint64(), g.base, g.minHeadroom)
	cur := int(g.current.Load())
	// Retune on a change of more than a tenth: every collection's live
	// heap differs a little.
	if pct == cur || (pct > cur*9/10 && pct < cur*11/10 && pct != g.base) {
		return
	}
	g.current.Store(int64(pct))
	debug.SetGCPercent(pct)
}

// agentGC sets the agent's GC policy unless $GOGC is set: agentGCPercent,
// raised while the live heap is small so that the headroom is at least
// agentGCMinHeadroom.
func agentGC() {
	if os.Getenv("GOGC") == "" {
		startGCFloor(agentGCPercent, agentGCMinHeadroom)
	}
}
