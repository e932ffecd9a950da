package agent

import (
	"context"
	"sync"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// nodeRuns tracks the node-level sources' background runs.
type nodeRuns struct {
	last    time.Time       // when the last run started
	found   []model.Finding // its findings
	running bool
	done    bool          // a run finished since the last read
	soon    bool          // a Node was deleted: run at the next step
	cost    time.Duration // how long the last run took
}

// interval is the runs' cadence: the audit interval, or longer when a run
// costs more than the budget allows (NodeRunCostFactor times its duration),
// so a node-level audit of a large cluster stays a small share of a core.
// The duration is wall time (a run blocked on a slow kernel counts too), so
// the interval is capped at 30 audit intervals.
func (r *nodeRuns) interval(cfg Config) time.Duration {
	return costBound(cfg.AuditInterval, cfg.NodeRunCostFactor, r.cost, 30*cfg.AuditInterval)
}

// startExtrasLocked starts the node-level sources (routes, links, conntrack)
// in the background when their slow cadence is due. They are full audits
// (a conntrack dump can take hundreds of milliseconds): run inline they
// would hold up the datapath reads that time kube-proxy's changes.
func (a *Agent) startExtrasLocked(ctx context.Context, now time.Time) {
	due := a.nodeRuns.soon || a.nodeRuns.last.IsZero() || now.Sub(a.nodeRuns.last) >= a.nodeRuns.interval(a.cfg)
	if len(a.extra) == 0 || a.nodeRuns.running || !due {
		return
	}
	a.nodeRuns.running, a.nodeRuns.soon, a.nodeRuns.last = true, false, now
	go a.runExtras(ctx)
}

// frozenDesired is the desired state for a node-level run, frozen on the
// first call (sources call it only when they need it: the conntrack rule,
// when a flow may be stale). Copying every frontend at the start of every
// run was, at 100k endpoints under churn, over a quarter of what the agent
// allocated (BENCHMARKS.md, "Live").
func (a *Agent) frozenDesired() func() model.Desired {
	return sync.OnceValue(func() model.Desired {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.tracker.merged.snapshot(a.cfg.NodeName)
	})
}

// runExtras runs every node-level source once and publishes the result; the
// next loop step folds the findings in.
func (a *Agent) runExtras(ctx context.Context) {
	desired := a.frozenDesired()
	began := a.clock.Now()
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
	a.nodeRuns.found, a.nodeRuns.running, a.nodeRuns.done = found, false, true
	a.nodeRuns.cost = a.clock.Since(began)
	a.mu.Unlock()
	a.Kick()
}
