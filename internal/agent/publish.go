package agent

import (
	"fmt"
	"time"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
)

// observedLocked is the published observation made safe to hand out: a
// copy when the reader changes its frontends in place (datapath.Freezer),
// taken at most once per version. The copy may be a change event newer than
// the published findings (the read that follows an event is immediate).
func (a *Agent) observedLocked(pub model.Observed) model.Observed {
	fz, ok := a.src.(datapath.Freezer) // false when src is nil
	if !ok {
		return pub
	}
	if a.frozenObs.Version != 0 && a.frozenObs.Version == pub.Version {
		return a.frozenObs
	}
	if f, ok := fz.Frozen(); ok {
		a.frozenObs = f
		return f
	}
	return pub
}

// publishLocked keeps what the last audit found for State. The desired state,
// the lag samples and the findings are not copied here but in State, when
// asked: an audit runs many times a second under churn, a query far less
// often (only an audit changes the findings, and it publishes).
func (a *Agent) publishLocked(now time.Time, obs model.Observed, readOK bool) {
	s := State{
		Node: a.cfg.NodeName, Datapath: a.mode, DatapathReason: a.reason,
		Now: now, LastAudit: now,
		Observed: a.state.Observed,
	}
	if readOK {
		s.Observed = obs
	}
	// Counted here, on the loop's goroutine: the reader changes its
	// frontends in place only there (ApplyChange), never during a query.
	s.ObservedFrontends = len(s.Observed.Frontends)
	if sa, ok := a.src.(datapath.SelfAuditor); ok {
		s.ReaderAudits, s.ReaderAuditDiffs, s.ReaderAuditsDeferred = sa.SelfAudits()
	}
	s.Notes = append(s.Notes, a.notes...)
	if a.src == nil || a.mode == model.ModeNone {
		s.Notes = append(s.Notes, "no kube-proxy datapath state found ("+a.reason+"): service findings are not reported")
	}
	if n := len(s.Observed.Warnings); n > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("datapath reader: %d warning(s), first: %s (all in /v1/drift)", n, s.Observed.Warnings[0]))
	}
	s.Sources = a.sources.list()
	for _, st := range s.Sources {
		if !st.Up {
			s.Notes = append(s.Notes, "source "+st.Name+" degraded: "+st.Error)
		}
	}
	a.state = s
}

// trimRecentLocked bounds the kept lag samples to the newest RecentSamples,
// compacting only when twice that many piled up (not on every sample).
func (a *Agent) trimRecentLocked() {
	keep := a.cfg.RecentSamples
	if keep > 0 && len(a.recent) >= 2*keep {
		a.recent = append([]drift.LagSample(nil), a.recent[len(a.recent)-keep:]...)
	}
}

// recentLocked is the newest RecentSamples lag samples, shared: samples are
// only appended past its end (its capacity is cut so that a caller's append
// copies) and compaction makes a new array, so what it holds never changes.
func (a *Agent) recentLocked() []drift.LagSample {
	r := a.recent
	if keep := a.cfg.RecentSamples; keep > 0 && len(r) > keep {
		r = r[len(r)-keep:]
	}
	return r[:len(r):len(r)]
}
