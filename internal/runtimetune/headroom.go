package runtimetune

// BasePercent is the agent's GC percent below the knee (Headroom). The
// agent's heap is mostly the tables it keeps (large, long-lived) and it
// allocates little per change, so the default 100 would let the heap grow
// to twice those tables before a collection, which is what the node's
// memory pays for, while each collection only marks a heap that is mostly
// live.
const BasePercent = 50

// The agent's GC headroom (the garbage let accumulate between two
// collections) as a function of its live heap L:
//
//	L <= knee:  max(minHeadroom, L x base %)
//	L >  knee:  knee x base % + (L - knee) / largeDiv
//
// Each collection marks the whole live heap, so the GC's CPU is about the
// live heap over the headroom, times the allocation rate; the RSS is about
// the live heap plus the headroom. A small heap (a small cluster) at 50 %
// would be collected every few MiB allocated, which under churn makes the
// collector a large share of the agent's CPU: the floor keeps at least
// minHeadroom. A large heap (a large cluster) is where the agent's RSS
// weighs on the node, and where one collection more costs little against
// the work of a read: past the knee each further MiB live adds only
// 1/largeDiv MiB of headroom. The knee is where the base percent reaches
// the floor, so the headroom never drops as the heap grows.
const (
	minHeadroom = 24 << 20
	knee        = 48 << 20
	largeDiv    = 16
)

// Headroom is the headroom for a live heap of live bytes at base percent.
func Headroom(live uint64, base int) uint64 {
	if live <= knee {
		return max(minHeadroom, live*uint64(base)/100)
	}
	return knee*uint64(base)/100 + (live-knee)/largeDiv
}

// PercentFor is the GC percent that gives a live heap of live bytes the
// Headroom, within [1, 400] (400: a nearly empty heap at start-up).
func PercentFor(live uint64, base int) int {
	if live == 0 {
		return base
	}
	return int(min(max(Headroom(live, base)*100/live, 1), 400))
}
