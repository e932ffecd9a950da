package agent

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
)

// Step runs one iteration: apply watch changes, and read and compare the
// datapath when it is due. Exported for tests driving a fake clock.
func (a *Agent) Step(ctx context.Context) {
	now := a.clock.Now()
	a.mu.Lock()
	// Judged on every step, not only when asked: a change of the view is
	// dated and logged when the loop sees it.
	vs := State{Now: now}
	api := a.judgeLocked(&vs) // the step's one read of the API health
	a.mu.Unlock()
	if !vs.Watch.Synced {
		return
	}
	a.applyChanges(now)
	if !a.readDue(now) {
		return
	}
	a.audit(ctx, api)
}

// applyChanges recomputes the desired state of changed services and records
// the changes for lag measurement.
func (a *Agent) applyChanges(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	first, changed := a.tracker.sync(a.cluster, a.cluster.Node(a.cfg.NodeName), a.cfg.NodeName)
	switch {
	case first:
		a.sched.restart()
	case changed:
		a.sched.changed()
	}
	a.confirmDesiredLocked(now)
}

func (a *Agent) busyLocked() bool {
	return a.tracker.busy() || a.findings.HasPending()
}

func (a *Agent) readDue(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.nodeRuns.readWanted() {
		return true // fold in the node-level findings, or run them now
	}
	return a.sched.due(now, a.busyLocked(), a.cfg)
}

func (a *Agent) nextWait() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.tracker.ready() {
		return a.cfg.FastPoll
	}
	now := a.clock.Now()
	wait := a.sched.wait(now, a.busyLocked(), a.cfg)
	if at := a.tracker.confirmDue(); !at.IsZero() {
		wait = max(min(wait, at.Sub(now)), time.Millisecond)
	}
	return wait
}

// audit reads the datapath, measures lag and updates findings; api is the
// step's API health.
func (a *Agent) audit(ctx context.Context, api APIState) {
	a.mu.Lock()
	obsAt, since := a.sched.startRead(a.clock.Now())
	nodeFound, nodeAt := a.nodeRuns.takeFindings()
	full := a.sched.fullDue(obsAt, a.cfg)
	if full {
		a.resyncDesiredLocked(obsAt)
	}
	hints, newHints := a.tracker.takeHints(a.cfg.NodeName)
	readGen := a.gen.readStarts()
	a.mu.Unlock()

	if a.src != nil && newHints {
		a.src.SetHints(hints)
	}
	if full && a.src != nil {
		if ar, ok := a.src.(datapath.AuditRequester); ok {
			ar.RequestAudit()
		} else {
			a.src.Resync()
		}
	}
	obs, readErr := a.readDatapath(ctx)
	ok := readErr == "" && a.src != nil
	if a.log.Enabled(ctx, slog.LevelDebug) {
		a.log.Debug("datapath read", "observed_at", obsAt, "held_since", since, "took", a.clock.Since(obsAt),
			"ok", ok, "frontends", len(obs.Frontends))
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	a.sched.readDone(now, full)
	ok = a.noteModeLocked(obs, ok)
	a.noteReadLocked(now, readErr)
	if ok {
		a.gen.publish(readGen)
	}
	var mismatches []model.Finding
	if ok {
		if !obs.HeldSince.IsZero() {
			since = obs.HeldSince // the kernel dated the state read (Cilium's map-write stamp)
		}
		a.observeLagLocked(obs, obsAt, since, now)
		mismatches = append(mismatches, a.comparer.Update(a.tracker.liveDesired(a.cfg.NodeName), obs,
			drift.Changes{Desired: a.tracker.takeChangedFrontends(), Full: full, ObservedInPlace: a.appliedInPlace})...)
		a.appliedInPlace = false
	}
	a.startNodeRunLocked(ctx, now)
	if ok || a.src == nil || a.mode == model.ModeNone {
		// The node findings of the last finished run, dated by its start: a
		// run that finished since takeFindings is folded in at the next read.
		ws := a.watchStatusLocked(now, api)
		a.findings.UpdateSampled(mismatches, nodeFound, now, nodeAt, drift.Proof{WatchHealthy: ws.Healthy,
			LastDelivery: ws.LastDelivery, Changed: a.tracker.takeChangedServices()})
	}
	a.publishLocked(now, obs, ok)
}

// noteModeLocked takes the datapath mode a read found. kube-proxy's state
// absent (not synced yet, or replaced) leaves nothing to compare: calling
// every frontend missing would be wrong, so the read does not count (false).
func (a *Agent) noteModeLocked(obs model.Observed, ok bool) bool {
	switch {
	case ok && obs.Datapath == model.ModeNone:
		a.mode, a.reason = model.ModeNone, strings.Join(obs.Warnings, "; ")
		return false
	case ok && obs.Datapath != "" && obs.Datapath != a.mode:
		a.mode, a.reason = obs.Datapath, "detected after start"
	}
	return ok
}

// observeLagLocked records the lag samples of the changes a read shows
// programmed.
func (a *Agent) observeLagLocked(obs model.Observed, at, since, now time.Time) {
	for _, s := range a.tracker.observe(obs, at, since, now) {
		if !obs.HeldSince.IsZero() {
			s.T2Source = drift.T2WriteStamp
		}
		a.log.Debug("change programmed", "service", s.Service, "change", s.Kind, "t1", s.T1, "t2", s.T2)
		a.recorder.ObserveLag(s)
		a.recent = append(a.recent, s)
	}
	a.trimRecentLocked()
}

// resyncDesiredLocked derives every service's desired state again from the
// watch cache (the full audit) and notes the services whose incrementally
// kept state differs, to correct ConfirmDelay later what still differs
// (confirmDesiredLocked).
func (a *Agent) resyncDesiredLocked(now time.Time) {
	if n := a.tracker.resync(a.cluster, a.cluster.Node(a.cfg.NodeName), a.cfg.NodeName, now); n > 0 {
		a.log.Debug("full audit: services differ from the watch cache; confirming once in-flight deliveries are applied",
			"services", n, "confirm_after", ConfirmDelay)
	}
}

// confirmDesiredLocked corrects what the full audit found differing and
// the deliveries since did not explain, saying so: a correction is a
// missed delivery, one later than ConfirmDelay, or a bug in the
// incremental path.
func (a *Agent) confirmDesiredLocked(now time.Time) {
	if n := a.tracker.confirm(a.cluster, a.cluster.Node(a.cfg.NodeName), a.cfg.NodeName, now); n > 0 {
		a.log.Warn("full audit: the incrementally kept desired state differed from the watch cache; corrected",
			"services", n)
		a.sched.changed()
	}
}

// readDatapath reads the datapath; the string is the read's error ("" when
// it succeeded, or when there is no reader).
func (a *Agent) readDatapath(ctx context.Context) (model.Observed, string) {
	if a.src == nil {
		return model.Observed{Datapath: model.ModeNone}, ""
	}
	start := a.clock.Now()
	obs, err := a.src.Snapshot(ctx)
	dur := a.clock.Since(start)
	// Polling is bounded by what reading costs the node (CPU when the reader
	// measures it), not by wall time, which a busy node inflates.
	cpu, events := a.src.LastReadCPU(), a.changes != nil && a.src.Evented()
	st := SourceStatus{Name: a.src.Name(), LastAttempt: start, Duration: dur, Up: err == nil}
	if err != nil {
		st.Error = err.Error()
		a.log.Warn("datapath read failed", "source", st.Name, "err", err)
	} else {
		st.LastSuccess = start
	}
	fr, isFR := a.src.(datapath.FallbackReporter)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sched.readCost(dur, cpu, events)
	a.sources.record(st)
	a.noteFallbackLocked(fr, isFR)
	return obs, st.Error
}
