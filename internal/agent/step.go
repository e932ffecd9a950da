package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
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
	a.applyChanges(now)
	if !a.readDue(now) {
		return
	}
	a.audit(ctx)
}

// applyChanges recomputes the desired state of changed services and records
// the changes for lag measurement.
func (a *Agent) applyChanges(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	node := a.cluster.Node(a.cfg.NodeName)
	if !a.initialized {
		// The initial list is the starting point, not a change: no lag samples.
		for _, k := range a.cluster.ServiceKeys() {
			a.desired[k] = watch.ExpectedService(node, a.cfg.NodeName, a.cluster.Service(k), a.cluster.SlicesFor(k))
		}
		a.dirty = map[string]dirtyService{}
		a.merged = nil
		a.initialized = true
		a.lastRead = time.Time{}
		return
	}
	if len(a.dirty) > 0 {
		a.merged = nil
	}
	for svc, d := range a.dirty {
		next := watch.ExpectedService(node, a.cfg.NodeName, a.cluster.Service(svc), a.cluster.SlicesFor(svc))
		prev := a.desired[svc]
		if len(next) == 0 {
			delete(a.desired, svc)
		} else {
			a.desired[svc] = next
		}
		kind, changed := drift.ClassifyChange(prev, next)
		if !changed {
			continue
		}
		a.changed[svc] = true
		a.freshChange = true
		a.lag.Record(drift.Change{Service: svc, Kind: kind, T0: d.t0, T1: d.t1, Previous: prev, Desired: next})
	}
	a.dirty = map[string]dirtyService{}
}

// pollInterval is the fast-poll interval, never cheaper than the read cost allows.
func (a *Agent) pollIntervalLocked() time.Duration {
	iv := a.cfg.FastPoll
	if min := time.Duration(a.cfg.MinPollCostFactor) * a.lastReadCost; min > iv {
		iv = min
	}
	return iv
}

func (a *Agent) busyLocked() bool {
	return len(a.lag.Pending()) > 0 || len(a.findings.Pending()) > 0
}

func (a *Agent) readDue(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lastRead.IsZero() || !a.hinted.IsZero() || a.extraDone || a.extraSoon && !a.extraRunning {
		return true
	}
	if a.freshChange && now.Sub(a.lastRead) >= a.cfg.FastPoll {
		// A new change: look right away (once per change burst), so T2 is not
		// overstated when kube-proxy programmed it before our watch delivered it.
		return true
	}
	iv := a.cfg.AuditInterval
	if a.busyLocked() {
		iv = a.pollIntervalLocked()
	}
	return now.Sub(a.lastRead) >= iv
}

func (a *Agent) nextWait() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.initialized {
		return a.cfg.FastPoll
	}
	iv := a.cfg.AuditInterval
	if a.busyLocked() {
		iv = a.pollIntervalLocked()
	}
	if a.freshChange {
		iv = a.cfg.FastPoll
	}
	w := iv - a.clock.Since(a.lastRead)
	if w < time.Millisecond {
		w = time.Millisecond
	}
	return w
}

// audit reads the datapath, measures lag and updates findings.
func (a *Agent) audit(ctx context.Context) {
	a.mu.Lock()
	obsAt := a.clock.Now()
	hinted := a.hinted
	if !hinted.IsZero() && hinted.Before(obsAt) {
		obsAt = hinted // the change event's time is the precise T2
	}
	a.hinted = time.Time{}
	a.freshChange, a.extraDone = false, false
	a.mu.Unlock()

	a.handHints()
	obs, ok := a.readDatapath(ctx)
	if a.log.Enabled(ctx, slog.LevelDebug) {
		a.log.Debug("datapath read", "observed_at", obsAt, "hint", hinted, "took", a.clock.Since(obsAt),
			"ok", ok, "frontends", len(obs.Frontends))
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	a.lastRead = now
	desired := a.mergedDesiredLocked()
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
		a.expireDeletionsLocked(now)
		for _, s := range a.lag.Observe(obs, obsAt) {
			s = a.datedRemovalLocked(s)
			a.log.Debug("change programmed", "service", s.Service, "change", s.Kind, "t1", s.T1, "t2", s.T2)
			a.recorder.ObserveLag(s)
			a.recent = append(a.recent, s)
		}
		if n := len(a.recent) - a.cfg.RecentSamples; n > 0 && a.cfg.RecentSamples > 0 {
			a.recent = append([]drift.LagSample(nil), a.recent[n:]...)
		}
		mismatches = drift.Compare(desired, obs)
	}
	a.startExtrasLocked(ctx, now, desired)
	mismatches = append(mismatches, a.extraFound...)
	if ok || a.src == nil || a.mode == model.ModeNone {
		ws := a.watchStatusLocked(now)
		a.findings.Update(mismatches, now, drift.Proof{WatchHealthy: ws.Healthy, LastDelivery: a.lastDelivery, Changed: a.changed})
		a.changed = map[string]bool{}
	}
	a.publishLocked(now, desired, obs, ok)
}

// handHints gives the reader what the API knows, once per desired-state change.
func (a *Agent) handHints() {
	if a.src == nil {
		return
	}
	a.mu.Lock()
	if a.merged != nil && a.hintsGiven {
		a.mu.Unlock()
		return
	}
	desired := a.mergedDesiredLocked()
	a.hintsGiven = true
	a.mu.Unlock()
	a.src.SetHints(model.HintsFor(desired))
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
	a.lastReadCost = dur
	if cpu := a.src.LastReadCPU(); cpu > 0 {
		// Bound polling by what reading costs the node (CPU), not by wall
		// time, which a busy node inflates.
		a.lastReadCost = cpu
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

// mergedDesiredLocked is the node's whole desired state, rebuilt only after
// a service's desired state changed (not on every fast poll).
func (a *Agent) mergedDesiredLocked() model.Desired {
	if a.merged != nil {
		return model.Desired{Node: a.cfg.NodeName, Frontends: a.merged}
	}
	m := map[model.Frontend]model.Verdict{}
	for _, fs := range a.desired {
		for fe, v := range fs {
			m[fe] = v
		}
	}
	a.merged = m // never mutated after this: published states share it
	a.hintsGiven = false
	return model.Desired{Node: a.cfg.NodeName, Frontends: m}
}

func (a *Agent) watchStatusLocked(now time.Time) WatchStatus {
	ws := a.lease
	ws.LastDelivery = a.lastDelivery
	ws.Synced, ws.SyncReason = a.cluster.Synced()
	switch {
	case !ws.Synced:
		ws.Healthy, ws.HealthReason = false, ws.SyncReason
	case !ws.LeaseSeen:
		ws.Healthy, ws.HealthReason = true, "no Lease for this node seen: watch currency is proven by other deliveries only"
	case now.Sub(latest(ws.LastLeaseDelivery, ws.LastDelivery)) > a.cfg.WatchUnhealthyAfter:
		// Any delivery proves the API server is serving the watch again: after
		// an outage the Lease informer's re-watch may back off for tens of seconds.
		ws.Healthy = false
		ws.HealthReason = fmt.Sprintf("no Lease renewal delivered for %s (limit %s): the API server or the watch lags; mismatches are not promoted",
			now.Sub(ws.LastLeaseDelivery).Round(time.Second), a.cfg.WatchUnhealthyAfter)
		if a.cfg.APIUnreachable != nil {
			if since, err, down := a.cfg.APIUnreachable(); down {
				ws.HealthReason += fmt.Sprintf("; the API server refuses connections since %s ago (%v)", now.Sub(since).Round(time.Second), err)
			}
		}
	default:
		ws.Healthy, ws.HealthReason = true, "Lease renewals arrive"
	}
	return ws
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
