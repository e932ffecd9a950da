package agent

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netdrift/netdrift/internal/model"
)

// ConfirmDelay is how long a full audit waits before it corrects a service
// whose incrementally kept desired state differs from the watch cache: the
// informer's cache is ahead of its deliveries, and a delivery still on its
// way to the loop is applied (and its change measured) in that time. What
// still differs then was missed.
const ConfirmDelay = 2 * time.Second

// resync is the full audit of the desired state: it derives every service's
// desired state again and notes the ones that differ from what the
// incremental updates kept, to confirm at now+ConfirmDelay (confirm). It
// returns how many differ now; before the initial list it does nothing.
func (t *changeTracker) resync(c Cluster, node *corev1.Node, nodeName string, now time.Time) int {
	if !t.initialized {
		return 0
	}
	t.fullAudits++
	seen := map[model.ServiceName]bool{}
	t.suspects = map[model.ServiceName]bool{}
	for _, k := range c.ServiceKeys() {
		seen[k] = true
		if _, dirty := t.dirty[k]; dirty {
			continue // applied, and measured, at the next step
		}
		if !sameDesired(t.desired[k], t.expected(c, node, nodeName, k)) {
			t.suspects[k] = true
		}
	}
	for k := range t.desired {
		if _, dirty := t.dirty[k]; !seen[k] && !dirty {
			t.suspects[k] = true
		}
	}
	if len(t.suspects) > 0 {
		t.confirmAt = now.Add(ConfirmDelay)
	}
	return len(t.suspects)
}

// confirmDue is when the suspects of the last full audit are to be
// confirmed (zero when there are none).
func (t *changeTracker) confirmDue() time.Time {
	if len(t.suspects) == 0 {
		return time.Time{}
	}
	return t.confirmAt
}

// confirm corrects, once ConfirmDelay has passed, the suspects of the last
// full audit that still differ from the watch cache after the deliveries
// applied meanwhile (call it after sync). It returns how many it corrected.
func (t *changeTracker) confirm(c Cluster, node *corev1.Node, nodeName string, now time.Time) int {
	if len(t.suspects) == 0 || now.Before(t.confirmAt) {
		return 0
	}
	n := 0
	for k := range t.suspects { // sync has applied (and measured) the deliveries that came
		if t.replaceIfDiffers(k, t.expected(c, node, nodeName, k)) {
			n++
		}
	}
	t.suspects = nil
	t.fullCorrections += uint64(n)
	return n
}

// fullAuditCounts is how many full audits ran and how many services'
// desired state they corrected.
func (t *changeTracker) fullAuditCounts() (audits, corrections uint64) {
	return t.fullAudits, t.fullCorrections
}

// replaceIfDiffers is the full audit's correction of one service. The
// change that made the difference gets no lag sample, and is counted
// (lagDropped): it was missed, or its delivery is later than
// ConfirmDelay (it then finds the desired state already set, and records
// nothing). A change of the service still pending waits for a desired
// state that was wrong: it is dropped, not left pending for ever, and is
// the one counted.
func (t *changeTracker) replaceIfDiffers(svc model.ServiceName, next map[model.Frontend]model.Verdict) bool {
	if sameDesired(t.desired[svc], next) {
		return false
	}
	t.set(svc, next)
	t.lag.Drop(svc)
	t.lagDropped++
	return true
}
