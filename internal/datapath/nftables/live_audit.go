package nftables

import (
	"context"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
)

// auditState is RequestAudit's: an audit read asked for, when it may run,
// and how many ran or were put off.
type auditState struct {
	asked    bool
	backoff  nfevents.AuditBackoff // when a put-off audit is tried again
	audits   int                   // audit reads that replaced the cache
	deferred int                   // audit reads put off: the ruleset kept changing under them
}

func (a *auditState) due(now time.Time) bool { return a.asked && a.backoff.Ready(now) }

// RequestAudit makes the next Snapshot that finds the cache current read
// both tables whole beside it (the agent's full audit): a stable read
// replaces the cache; one that a commit changed leaves the cache in use
// (the change events keep it current) and is tried again later
// (nfevents.AuditBackoff: 30 s, doubling up to 5 minutes while commits
// keep spoiling it). Dropping the cache instead would make every
// change event a full read for as long as commits keep that read unstable
// (at 100k endpoints, seconds of CPU per event). False when nothing is
// cached: the next Snapshot reads everything anyway.
func (n *Reader) RequestAudit() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cache == nil {
		return false
	}
	n.audit.asked = true
	return true
}

// Audits counts the audit reads that replaced the cache and those put off.
func (n *Reader) Audits() (audits, deferred int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.audit.audits, n.audit.deferred
}

// auditLocked is the audit read: the cache stays until a stable read
// replaces it. It makes one attempt, not fetch's retries: the cache is
// current meanwhile, and under sustained commits each retry is another
// full read that the next commit spoils.
func (n *Reader) auditLocked(ctx context.Context) (model.Observed, error) {
	n.fullReads++
	tables, gen, stable, err := n.fetch(ctx, 0)
	if err != nil && ctx.Err() != nil {
		return model.Observed{}, err
	}
	if err != nil || !stable {
		n.audit.deferred++
		n.audit.backoff.PutOff(time.Now())
		return n.cachedLocked(), nil
	}
	n.audit = auditState{audits: n.audit.audits + 1, deferred: n.audit.deferred}
	view := newNFTView(tables, n.Config.Hints)
	n.rehint = false
	n.pub.Drop()
	n.cache = &nftCache{gen: gen, tables: tables, view: view}
	return n.pub.Publish(view.observed(), nil), nil
}
