package nfevents

import (
	"sync"
	"time"
)

// commitRing is how many commits the log remembers: more than the events
// that may wait for the reader (Options.Events, 256 by default), so the
// first commit a reader has not seen is still known while it catches up.
const commitRing = 1024

// commitLog remembers the generation and date of the last commits the
// watcher saw, delivered or not, for CommittedAfter.
type commitLog struct {
	mu   sync.Mutex
	ring [commitRing]struct {
		gen uint32
		at  time.Time
	}
	n int // commits recorded, up to commitRing
	i int // next slot
}

func (l *commitLog) add(gen uint32, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.i].gen, l.ring[l.i].at = gen, at
	l.i = (l.i + 1) % commitRing
	if l.n < commitRing {
		l.n++
	}
}

// after counts the remembered commits later than generation gen (in
// generation order, wrapping) and dates the first of them. When all
// those remembered are later, the count and date are of those remembered:
// a lower bound.
func (l *commitLog) after(gen uint32) (n int, first time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := 1; k <= l.n; k++ {
		e := l.ring[(l.i-k+commitRing)%commitRing]
		if int32(e.gen-gen) <= 0 {
			break
		}
		n, first = n+1, e.at
	}
	return n, first
}

// CommittedAfter says how far a view that reflects generation gen trails
// the kernel: how many commits the watcher saw after gen, and when the
// first of them was committed (zero when none). A reader that applies the
// events in order knows its view is behind while this is not zero.
func (w *Watcher) CommittedAfter(gen uint32) (int, time.Time) { return w.commits.after(gen) }
