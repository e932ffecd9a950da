package api

import (
	"fmt"
	"sort"
	"strings"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/rst"
)

// ServiceViewOf builds the desired-vs-observed view of one service.
func ServiceViewOf(s agent.State, key string, pr Providers) ServiceView {
	v := ServiceView{Service: key, View: ViewOf(s.View), Frontends: []FrontendView{}, Endpoints: []Endpoint{}, Findings: []Finding{},
		PendingMismatches: []Finding{}, Pending: []PendingChange{}, Lag: []LagSample{}}
	seen := map[model.Frontend]bool{}
	eps := map[string]bool{}
	for _, fe := range model.SortedFrontends(s.Desired.Frontends) {
		want := s.Desired.Frontends[fe]
		if want.Service.Service() != key {
			continue
		}
		v.Exists = true
		seen[fe] = true
		fv := frontendView(fe, want.Service, &want, s.Observed.Frontends)
		v.Frontends = append(v.Frontends, fv)
		for _, e := range want.Endpoints {
			id := want.Service.Port + "|" + e.Addr.String()
			if eps[id] {
				continue
			}
			eps[id] = true
			v.Endpoints = append(v.Endpoints, Endpoint{Port: want.Service.Port, Address: e.Addr.String(), Node: e.NodeName,
				Ready: e.Ready, Serving: e.Serving, Terminating: e.Terminating, Included: e.Included, Reason: e.Reason})
		}
	}
	for _, fe := range model.SortedFrontends(s.Observed.Frontends) {
		got := s.Observed.Frontends[fe]
		if seen[fe] || got.Service.Service() != key {
			continue
		}
		v.Frontends = append(v.Frontends, frontendView(fe, got.Service, nil, s.Observed.Frontends))
	}
	sort.SliceStable(v.Endpoints, func(i, j int) bool { return v.Endpoints[i].Port < v.Endpoints[j].Port })
	v.Findings = append(v.Findings, trackedWithConnections(filterTracked(s.Stale, key), s.Now, pr.Hurt)...)
	v.PendingMismatches = append(v.PendingMismatches, trackedWithConnections(filterTracked(s.Pending, key), s.Now, pr.Hurt)...)
	sk, skOK := model.ParseServiceName(key)
	for _, p := range s.PendingChanges {
		if skOK && p.Service == sk {
			v.Pending = append(v.Pending, PendingOf([]drift.PendingChange{p}, s.Now)...)
		}
	}
	for _, l := range s.Recent {
		if skOK && l.Service == sk {
			v.Lag = append(v.Lag, LagSampleOf(l))
		}
	}
	if pr.RSTs != nil {
		var advice []string
		v.RSTs, advice = serviceRSTs(pr.RSTs.Snapshot(), key, preStopOf(s))
		v.Advice = append(v.Advice, advice...)
	}
	return v
}

func frontendView(fe model.Frontend, sp model.ServicePort, want *model.Verdict, observed map[model.Frontend]model.Verdict) FrontendView {
	fv := FrontendView{Frontend: fe.String(), FrontendKind: string(fe.Kind), Port: sp.Port, Protocol: string(fe.Protocol)}
	if want != nil {
		fv.Desired = VerdictOf(*want)
	}
	got, ok := observed[fe]
	if ok {
		fv.Observed = VerdictOf(got)
	}
	fv.Match = want != nil && ok && drift.SameVerdict(*want, got)
	return fv
}

func filterTracked(ts []drift.Tracked, key string) []drift.Tracked {
	var out []drift.Tracked
	for _, t := range ts {
		if t.Service.Service() == key {
			out = append(out, t)
		}
	}
	return out
}

// serviceRSTs are the resets the kernel counted for the service key
// (namespace/name), with the preStop advice when terminating pods sent any
// and the readiness advice when Ready endpoints refused clients.
func serviceRSTs(snap rst.Snapshot, key string, preStop *float64) (*ServiceRSTs, []string) {
	ns, name, _ := strings.Cut(key, "/")
	sk := model.ServiceName{Namespace: ns, Name: name}
	n, by := snap.Totals[sk], snap.ByState[sk]
	if n == 0 && by.Total() == 0 {
		return nil, nil
	}
	var advice []string
	if n > 0 && preStop != nil {
		advice = append(advice, fmt.Sprintf(
			"%d RSTs were sent from terminating pods of this service: add a preStop sleep of at least %.0f s", n, *preStop))
	}
	if by.ReadyRefusals > 0 {
		advice = append(advice, fmt.Sprintf(
			"%d connections refused by Ready endpoints: the readiness probe does not cover the listener",
			by.ReadyRefusals))
	}
	return &ServiceRSTs{Total: n, Ready: by.Ready, NotReady: by.NotReady, Terminating: by.Terminating, Deleted: by.Deleted,
		ReadyRefusals: by.ReadyRefusals, TerminatingRefusals: by.TerminatingRefusals}, advice
}
