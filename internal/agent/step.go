package agent

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
)

// Step runs one iteration: apply watch changes, and read and compare the
// datapath when it is due. Exported for tests driving a fake clock.
func (a *Agent) Step(ctx context.Context) {
	now := a.clock.Now()
	if ok, why := a.cluster.Synced(); !ok {
		a.mu.Lock()
		a.state.Ready, a.state.ReadyReason = false, why
		a.mu.Unlock()
		return
	}
	a.applyChanges()
	if !a.readDue(now) {
		return
	}
	a.audit(ctx)
}

// applyChanges recomputes the desired state of changed services and records
// the changes for lag measurement.
func (a *Agent) applyChanges() {
	a.mu.Lock()
	defer a.mu.Unlock()
	node := a.cluster.Node(a.cfg.NodeName)
	if !a.tracker.initialized {
		a.tracker.initialize(a.cluster, node, a.cfg.NodeName)
		a.sched.lastRead = time.Time{}
		return
	}
	if a.tracker.apply(a.cluster, node, a.cfg.NodeName) {
		a.sched.freshChange = true
	}
}

func (a *Agent) busyLocked() bool {
	return a.tracker.lag.Len() > 0 || a.findings.HasPending()
}

func (a *Agent) readDue(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.nodeRuns.done || a.nodeRuns.soon && !a.nodeRuns.running {
		return true // fold in the node-level findings, or run them now
	}
	return a.sched.due(now, a.busyLocked(), a.cfg)
}

func (a *Agent) nextWait() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.tracker.initialized {
		return a.cfg.FastPoll
	}
	return a.sched.wait(a.clock.Since(a.sched.lastRead), a.busyLocked(), a.cfg)
}

// audit reads the datapath, measures lag and updates findings.
func (a *Agent) audit(ctx context.Context) {
	a.mu.Lock()
	obsAt, since := a.sched.startRead(a.clock.Now())
	a.nodeRuns.done = false
	full := a.sched.fullDue(obsAt, a.cfg)
	if full {
		a.resyncDesiredLocked()
	}
	a.mu.Unlock()

	a.handHints()
	if full && a.src != nil {
		a.src.Resync()
	}
	obs, ok := a.readDatapath(ctx)
	if a.log.Enabled(ctx, slog.LevelDebug) {
		a.log.Debug("datapath read", "observed_at", obsAt, "held_since", since, "took", a.clock.Since(obsAt),
			"ok", ok, "frontends", len(obs.Frontends))
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	a.sched.lastRead = now
	if full || a.sched.lastFull.IsZero() {
		a.sched.lastFull, a.sched.fullCost = now, a.sched.lastReadCost
	}
	desired := a.tracker.merged.current(a.cfg.NodeName) // live: used under a.mu only
	var mismatches []model.Finding
	if ok && obs.Datapath == model.ModeNone {
		// kube-proxy's state is absent (not synced yet, or replaced): nothing
		// to compare; calling every frontend missing would be wrong.
		a.mode, a.reason = model.ModeNone, strings.Join(obs.Warnings, "; ")
		ok = false
	} else if ok && obs.Datapath != "" && obs.Datapath != a.mode {
		a.mode, a.reason = obs.Datapath, "detected after start"
	}
	if ok {
		a.tracker.expireDeletions(now)
		for _, s := range a.tracker.lag.ObserveSince(obs, obsAt, since) {
			s = a.tracker.datedRemoval(s)
			a.log.Debug("change programmed", "service", s.Service, "change", s.Kind, "t1", s.T1, "t2", s.T2)
			a.recorder.ObserveLag(s)
			a.recent = append(a.recent, s)
		}
		a.trimRecentLocked()
		mismatches = append(mismatches, a.comparer.Update(desired, a.tracker.takeChangedFrontends(), full, obs)...)
	}
	a.startExtrasLocked(ctx, now)
	mismatches = append(mismatches, a.nodeRuns.found...)
	if ok || a.src == nil || a.mode == model.ModeNone {
		ws := a.watchStatusLocked(now)
		a.findings.Update(mismatches, now, drift.Proof{WatchHealthy: ws.Healthy, LastDelivery: a.health.lastDelivery, Changed: a.tracker.changed})
		a.tracker.changed = map[string]bool{}
	}
	a.publishLocked(now, obs, ok)
}

// resyncDesiredLocked derives every service's desired state again from the
// watch cache (the full audit) and corrects what the incremental updates
// missed, saying so: a correction is a bug in the incremental path.
func (a *Agent) resyncDesiredLocked() {
	if !a.tracker.initialized {
		return
	}
	n := a.tracker.resync(a.cluster, a.cluster.Node(a.cfg.NodeName), a.cfg.NodeName)
	a.fullAudits, a.fullCorrections = a.fullAudits+1, a.fullCorrections+uint64(n)
	if n > 0 {
		a.log.Warn("full audit: the incrementally kept desired state differed from the watch cache; corrected",
			"services", n)
	}
}

// handHints gives the reader what the API knows, only when the frontends or
// their service ports changed (not on every endpoint change).
func (a *Agent) handHints() {
	if a.src == nil {
		return
	}
	a.mu.Lock()
	if !a.tracker.hintsStale {
		a.mu.Unlock()
		return
	}
	hints := model.HintsFor(a.tracker.merged.current(a.cfg.NodeName))
	a.tracker.hintsStale = false
	a.mu.Unlock()
	a.src.SetHints(hints)
}

func (a *Agent) readDatapath(ctx context.Context) (model.Observed, bool) {
	if a.src == nil {
		return model.Observed{Datapath: model.ModeNone}, false
	}
	start := a.clock.Now()
	obs, err := a.src.Snapshot(ctx)
	dur := a.clock.Since(start)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sched.lastReadCost = dur
	a.sched.events = a.changes != nil && a.src.Evented()
	if cpu := a.src.LastReadCPU(); cpu > 0 {
		// Bound polling by what reading costs the node (CPU), not by wall
		// time, which a busy node inflates.
		a.sched.lastReadCost = cpu
	}
	st := a.sources[a.src.Name()]
	st.Name, st.LastAttempt, st.Duration = a.src.Name(), start, dur
	if err != nil {
		st.Up, st.Error = false, err.Error()
		a.log.Warn("datapath read failed", "source", st.Name, "err", err)
	} else {
		st.Up, st.Error, st.LastSuccess = true, "", start
	}
	a.sources[st.Name] = st
	return obs, err == nil
}
