package runtimetune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Tuner re-tunes the GC percent after every collection from the live heap
// that collection measured, for the Headroom. It runs on the finalizer
// goroutine.
type Tuner struct {
	base    int
	current atomic.Int64
	stopped atomic.Bool
	sample  []metrics.Sample
}

// StartTuner sets the GC percent to base and re-tunes it after every
// collection.
func StartTuner(base int) *Tuner {
	g := &Tuner{base: base, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	g.current.Store(int64(base))
	debug.SetGCPercent(base)
	g.arm()
	return g
}

// Percent is the GC percent the tuner set last.
func (g *Tuner) Percent() int { return int(g.current.Load()) }

// sentinel is garbage from birth: its finalizer runs after the next
// collection. It holds a pointer so the tiny allocator (which may keep a
// finalized object alive with its neighbours) does not take it.
type sentinel struct{ _ *byte }

func (g *Tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		g.tune()
		g.arm()
	})
}

func (g *Tuner) tune() {
	metrics.Read(g.sample)
	if g.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	pct := PercentFor(g.sample[0].Value.Uint64(), g.base)
	cur := g.Percent()
	// Retune on a change of more than a tenth: every collection's live
	// heap differs a little.
	if pct == cur || (pct > cur*9/10 && pct < cur*11/10) {
		return
	}
	g.current.Store(int64(pct))
	debug.SetGCPercent(pct)
}
