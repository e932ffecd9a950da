package agent

import (
	"sort"
	"time"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
)

func (a *Agent) publishLocked(now time.Time, desired model.Desired, obs model.Observed, readOK bool) {
	s := State{
		Node: a.cfg.NodeName, Datapath: a.mode, DatapathReason: a.reason,
		Ready: true, Now: now, LastAudit: now,
		Stale: a.findings.Stale(), Pending: a.findings.Pending(),
		PendingChanges: a.tracker.lag.Pending(),
		Recent:         append([]drift.LagSample(nil), a.recent...),
		Desired:        desired,
		Observed:       a.state.Observed,
	}
	if readOK {
		s.Observed = obs
	}
	if a.src == nil || a.mode == model.ModeNone {
		s.Notes = append(s.Notes, "no kube-proxy datapath state found ("+a.reason+"): service findings are not reported")
	}
	for _, st := range a.sources {
		s.Sources = append(s.Sources, st)
		if !st.Up {
			s.Notes = append(s.Notes, "source "+st.Name+" degraded: "+st.Error)
		}
	}
	sort.Slice(s.Sources, func(i, j int) bool { return s.Sources[i].Name < s.Sources[j].Name })
	a.state = s
}
