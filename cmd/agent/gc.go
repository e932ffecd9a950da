package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// agentGCPercent is the base of the agent's GC headroom (gcHeadroom). Its
// heap is mostly the tables it keeps (large, long-lived) and it allocates
// little per change: at the default 100 the heap may grow to twice the live
// tables before a collection, which at 100k endpoints put the agent's peak
// RSS above kube-proxy's. At 50 the headroom is halved for a few more
// collections of a heap that is mostly live (BENCHMARKS.md, "Live").
const agentGCPercent = 50

// The agent's GC headroom (the garbage let accumulate between two
// collections) as a function of its live heap L:
//
//	L <= gcKnee:  max(gcMinHeadroom, L x agentGCPercent %)
//	L >  gcKnee:  gcKnee x agentGCPercent % + (L - gcKnee) / gcLargeDiv
//
// Each collection marks the whole live heap, so the GC's CPU is about the
// live heap over the headroom, times the allocation rate; the RSS is about
// the live heap plus the headroom. Small heaps (10k endpoints: 25-45 MiB
// live) had a collection every 12-20 MiB allocated at 50 %, which under
// churn made the collector a sixth of the agent's CPU: the floor raises the
// headroom to gcMinHeadroom. Measured at 10k, 20 changes/s (BENCHMARKS.md,
// "Live"): 32 MiB put the iptables-nft agent's peak RSS at 0.99x
// kube-proxy's, 24 MiB at 0.93x for nearly the same CPU. Large heaps (100k
// endpoints: 250-300 MiB live in the iptables modes, mostly the tables kept
// and the watch cache) are where the peak-RSS goal binds and where the CPU
// goal has room (0.05-0.1x of kube-proxy's there): above gcKnee each
// further MiB live adds only 1/gcLargeDiv MiB of headroom, at the price of
// more collections of that heap (at 264 MiB live, 37.5 MiB: 51.5 MiB with
// an 80 MiB knee, 81 MiB with a 128 MiB knee and 1/8). The knee is where
// the base percent gives the floor, so the headroom is the floor from 0 to
// 48 MiB live and grows by 1/16 past it.
const (
	gcMinHeadroom = 24 << 20
	gcKnee        = 48 << 20
	gcLargeDiv    = 16
)

// gcHeadroom is the headroom for a live heap of live bytes at base percent.
func gcHeadroom(live uint64, base int) uint64 {
	if live <= gcKnee {
		return max(gcMinHeadroom, live*uint64(base)/100)
	}
	return gcKnee*uint64(base)/100 + (live-gcKnee)/gcLargeDiv
}

// Above gcLimitLive of live heap the tuner also sets a soft memory limit
// (memoryLimitFor): the heap goal, plus the runtime's other memory, plus a
// sixty-fourth of those. Without it the runtime's background scavenger
// keeps free pages up to a tenth above the heap goal: at 100k endpoints
// 30-50 MiB of HeapIdle, and the peak RSS was 349 MiB. Under a limit it
// returns pages past 95 % of the limit, a little below the goal and the
// other memory: the pages a growing heap needs before its next collection
// fault back in (some system CPU; at 100k endpoints the agent is at
// 0.08-0.14x of kube-proxy's CPU, the goal 0.25x), and the GC may start a
// little before the GC percent's goal. The limit is recomputed after every
// collection, so a live heap that grows is never held under a stale one
// for more than one cycle. Measured at 100k endpoints, iptables-nft:
// peak RSS 332-342 MiB (BENCHMARKS.md, "Live", eleventh session). Small heaps
// (10k endpoints: 25-45 MiB live) get none: their RSS is below
// kube-proxy's, and returning pages that churn soon faults back in costs
// CPU there.
const gcLimitLive = 128 << 20

// memoryLimitFor is the soft memory limit for a live heap of live bytes
// with a GC headroom of headroom bytes, when the runtime holds other bytes
// besides heap objects and free heap pages (stacks, fragmentation within
// spans, GC metadata, the binary's data); ceiling below gcLimitLive, and
// never above it (the limit the process started with: $GOMEMLIMIT, which
// the Helm chart sets from the container's limit).
func memoryLimitFor(live, headroom, other uint64, ceiling int64) int64 {
	if live < gcLimitLive {
		return ceiling
	}
	keep := live + headroom + other
	return min(ceiling, int64(keep+keep/64))
}

// gcPercentFor is the GC percent that gives a live heap of live bytes the
// headroom of gcHeadroom, within [1, 400] (400: a nearly empty heap at
// start-up).
func gcPercentFor(live uint64, base int) int {
	if live == 0 {
		return base
	}
	return int(min(max(gcHeadroom(live, base)*100/live, 1), 400))
}

// gcTuner re-tunes the GC percent after every collection from the live heap
// that collection measured. It runs on the finalizer goroutine.
type gcTuner struct {
	base    int
	ceiling int64 // the memory limit at start ($GOMEMLIMIT, or none)
	current atomic.Int64
	stopped atomic.Bool
	sample  []metrics.Sample
}

// The runtime/metrics the tuner reads, in gcTuner.sample's order.
var gcTunerMetrics = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
}

func startGCTuner(base int) *gcTuner {
	g := &gcTuner{base: base, ceiling: debug.SetMemoryLimit(-1), sample: make([]metrics.Sample, len(gcTunerMetrics))}
	for i, name := range gcTunerMetrics {
		g.sample[i].Name = name
	}
	g.current.Store(int64(base))
	debug.SetGCPercent(base)
	g.arm()
	return g
}

// gcSentinel is garbage from birth: its finalizer runs after the next
// collection. It holds a pointer so the tiny allocator (which may keep a
// finalized object alive with its neighbours) does not take it.
type gcSentinel struct{ _ *byte }

func (g *gcTuner) arm() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		if g.stopped.Load() {
			return
		}
		g.tune()
		g.arm()
	})
}

// stop ends the re-tuning after the next collection (the percent stays).
func (g *gcTuner) stop() { g.stopped.Store(true) }

func (g *gcTuner) tune() {
	metrics.Read(g.sample)
	v := make([]uint64, len(g.sample))
	for i, s := range g.sample {
		if s.Value.Kind() != metrics.KindUint64 {
			return
		}
		v[i] = s.Value.Uint64()
	}
	live, total, released, objects, free := v[0], v[1], v[2], v[3], v[4]
	other := total - min(total, released+objects+free)
	debug.SetMemoryLimit(memoryLimitFor(live, gcHeadroom(live, g.base), other, g.ceiling))
	pct := gcPercentFor(live, g.base)
	cur := int(g.current.Load())
	// Retune on a change of more than a tenth: every collection's live
	// heap differs a little.
	if pct == cur || (pct > cur*9/10 && pct < cur*11/10) {
		return
	}
	g.current.Store(int64(pct))
	debug.SetGCPercent(pct)
}

// agentGC sets the agent's GC policy (gcHeadroom) unless $GOGC is set.
func agentGC() {
	if os.Getenv("GOGC") == "" {
		startGCTuner(agentGCPercent)
	}
}
