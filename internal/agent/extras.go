package agent

import (
	"context"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// startExtrasLocked starts the node-level sources (routes, links, conntrack)
// in the background when their slow cadence is due. They are full audits
// (a conntrack dump can take hundreds of milliseconds): run inline they
// would hold up the datapath reads that time kube-proxy's changes.
func (a *Agent) startExtrasLocked(ctx context.Context, now time.Time, desired model.Desired) {
	due := a.extraSoon || a.lastExtra.IsZero() || now.Sub(a.lastExtra) >= a.cfg.AuditInterval
	if len(a.extra) == 0 || a.extraRunning || !due {
		return
	}
	a.extraRunning, a.extraSoon, a.lastExtra = true, false, now
	go a.runExtras(ctx, desired)
}

// runExtras runs every node-level source once and publishes the result; the
// next loop step folds the findings in.
func (a *Agent) runExtras(ctx context.Context, desired model.Desired) {
	cs := a.cluster.State()
	var found []model.Finding
	statuses := make([]SourceStatus, 0, len(a.extra))
	for _, fs := range a.extra {
		start := a.clock.Now()
		f, err := fs.Findings(ctx, cs, desired)
		st := SourceStatus{Name: fs.Name(), LastAttempt: start, Duration: a.clock.Since(start), Up: err == nil}
		if err != nil {
			st.Error = err.Error()
		} else {
			st.LastSuccess = start
		}
		found = append(found, f...) // a degraded source still reports what it could check
		statuses = append(statuses, st)
	}
	a.mu.Lock()
	for _, st := range statuses {
		if !st.Up {
			st.LastSuccess = a.sources[st.Name].LastSuccess
		}
		a.sources[st.Name] = st
	}
	a.extraFound, a.extraRunning, a.extraDone = found, false, true
	a.mu.Unlock()
	a.Kick()
}
