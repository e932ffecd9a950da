package agent

import (
	"context"
	"sync"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// nodeRuns tracks the background runs of the node sources (routes, links,
// conntrack, cluster-scope checks): when the last one started, what it
// found, whether one runs. Its fields are changed only by its methods; the
// agent calls them under its lock.
type nodeRuns struct {
	last    time.Time       // when the last run started
	found   []model.Finding // the last finished run's findings
	foundAt time.Time       // when that run started
	running bool
	done    bool          // a run finished since the last read
	soon    bool          // a Node was deleted: run at the next step
	cost    time.Duration // how long the last run took
}

// interval is the runs' cadence: the audit interval, or longer when a run
// costs more than the budget allows (NodeRunCostFactor times its duration),
// so the node runs of a large cluster stay a small share of a core.
// The duration is wall time (a run blocked on a slow kernel counts too), so
// the interval is capped at 30 audit intervals.
func (r *nodeRuns) interval(cfg Config) time.Duration {
	return costBound(cfg.AuditInterval, cfg.NodeRunCostFactor, r.cost, 30*cfg.AuditInterval)
}

// runSoon asks for a run at the next step (a Node was deleted: endpoints
// on it and routes to it are checked now, not on the slow cadence).
func (r *nodeRuns) runSoon() { r.soon = true }

// readWanted reports whether the next step must read: a finished run's
// findings wait to be folded in, or a run was asked for and none runs.
func (r *nodeRuns) readWanted() bool { return r.done || r.soon && !r.running }

// takeFindings hands the last finished run's findings, and when that run
// started, to a read, which folds them in.
func (r *nodeRuns) takeFindings() ([]model.Finding, time.Time) {
	r.done = false
	return r.found, r.foundAt
}

// start reports whether a run starts at now (due, and none running), and
// records it as running.
func (r *nodeRuns) start(now time.Time, cfg Config) bool {
	due := r.soon || r.last.IsZero() || now.Sub(r.last) >= r.interval(cfg)
	if r.running || !due {
		return false
	}
	r.running, r.soon, r.last = true, false, now
	return true
}

// finish records a run's findings and how long it took.
func (r *nodeRuns) finish(found []model.Finding, took time.Duration) {
	r.found, r.foundAt, r.running, r.done, r.cost = found, r.last, false, true, took
}

// startNodeRunLocked starts the node sources in the background when their
// slow cadence is due. They are full audits (a conntrack dump can take
// hundreds of milliseconds): run inline they would hold up the datapath
// reads that time kube-proxy's changes.
func (a *Agent) startNodeRunLocked(ctx context.Context, now time.Time) {
	if len(a.nodeSources) == 0 || !a.nodeRuns.start(now, a.cfg) {
		return
	}
	go a.runNodeSources(ctx)
}

// frozenDesired is the desired state for a node run, frozen on the first
// call: sources call it only when they need it (the conntrack rule, when a
// flow may be stale), because copying every frontend at the start of every
// run would cost a copy of the node's desired state per run under churn.
func (a *Agent) frozenDesired() func() model.Desired {
	return sync.OnceValue(func() model.Desired {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.tracker.frozenDesired(a.cfg.NodeName)
	})
}

// runNodeSources runs every node source once and records the result; the
// next loop step folds the findings in.
func (a *Agent) runNodeSources(ctx context.Context) {
	desired := a.frozenDesired()
	began := a.clock.Now()
	cs := a.cluster.State()
	var found []model.Finding
	statuses := make([]SourceStatus, 0, len(a.nodeSources))
	for _, fs := range a.nodeSources {
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
		a.sources.record(st)
	}
	a.nodeRuns.finish(found, a.clock.Since(began))
	a.mu.Unlock()
	a.Kick()
}
