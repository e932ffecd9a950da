package nfevents

import "time"

// The audit read of an event-fed reader (its state patched from change
// messages, read whole now and then to check it) spans many netlink
// requests; a commit between them leaves the read unusable. At 100k
// endpoints a read costs seconds of CPU and kube-proxy commits every few
// seconds, so an audit retried at a fixed interval can cost a large share
// of a core for as long as the churn lasts. AuditBackoff spaces the tries.

const (
	// AuditRetryFirst is how long an audit put off for the first time
	// waits before it is tried again.
	AuditRetryFirst = 30 * time.Second
	// AuditRetryMax bounds the wait: each further audit put off waits twice
	// as long as the one before, up to this (the agent's full-audit period).
	AuditRetryMax = 5 * time.Minute
)

// AuditBackoff is when an event-fed reader may next try an audit read. The
// zero value allows one at once.
type AuditBackoff struct {
	after  time.Time
	misses int // audits put off in a row
}

// Ready reports whether an audit read may run at now.
func (b *AuditBackoff) Ready(now time.Time) bool { return !now.Before(b.after) }

// PutOff records an audit read that commits left unusable and returns how
// long the next one waits.
func (b *AuditBackoff) PutOff(now time.Time) time.Duration {
	wait := AuditRetryMax
	if b.misses < 8 && AuditRetryFirst<<b.misses < AuditRetryMax {
		wait = AuditRetryFirst << b.misses
	}
	b.misses++
	b.after = now.Add(wait)
	return wait
}

// Done records a completed audit read: the next one put off waits
// AuditRetryFirst again.
func (b *AuditBackoff) Done() { *b = AuditBackoff{} }
