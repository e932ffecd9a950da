package nfevents

import "time"

// DefaultBehindLimit is the wait Behind allows when the reader sets none.
const DefaultBehindLimit = 2 * time.Second

// Behind decides whether an event-fed reader whose kept state trails the
// kernel's nf_tables generation may answer from it while the change events
// that bring it up to date are on their way, rather than read everything
// again. kube-proxy commits a sync as several transactions (per family,
// per table): a read between two of them sees a newer generation whose
// events have not been applied yet. Past the reader's limit (its
// BehindLimit setting) the kept state is taken as lost: events that never
// arrive cost at most that. The zero value is ready (not behind). Not safe
// for concurrent use: the reader calls it under its own lock.
type Behind struct {
	since time.Time // when the kept state was first found trailing; zero: it does not
}

// Await reports whether the reader may still wait for the events of a
// generation ahead of its kept state, for at most limit
// (DefaultBehindLimit when not positive); the first call starts the wait.
func (b *Behind) Await(limit time.Duration) bool {
	if limit <= 0 {
		limit = DefaultBehindLimit
	}
	now := time.Now()
	if b.since.IsZero() {
		b.since = now
	}
	return now.Sub(b.since) < limit
}

// Clear ends a wait: the kept state is current (an event was applied, the
// generation matched, or everything was read again).
func (b *Behind) Clear() { b.since = time.Time{} }
