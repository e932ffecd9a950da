// Package drift compares the desired datapath (from the API) with the observed
// one (from the kernel) and tracks how long each difference has lasted.
// Everything here is pure: no I/O, clocks are injected.
package drift

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// Compare returns the service-datapath findings of one node: frontends and
// backends that differ between desired and observed. Desired verdicts marked
// Uncertain never yield findings. The result is sorted.
func Compare(desired model.Desired, observed model.Observed) []model.Finding {
	var out []model.Finding
	for _, fe := range model.SortedFrontends(desired.Frontends) {
		want := desired.Frontends[fe]
		got, ok := observed.Frontends[fe]
		if want.Uncertain != "" {
			continue
		}
		if !ok {
			out = append(out, missingFrontend(fe, want))
			continue
		}
		out = append(out, compareVerdicts(fe, want, got, observed.Datapath)...)
	}
	for _, fe := range model.SortedFrontends(observed.Frontends) {
		if _, ok := desired.Frontends[fe]; ok {
			continue
		}
		out = append(out, staleFrontend(fe, observed.Frontends[fe]))
	}
	model.SortFindings(out)
	return out
}

func frontendPtr(fe model.Frontend) *model.Frontend { return &fe }

func missingFrontend(fe model.Frontend, want model.Verdict) model.Finding {
	return model.Finding{
		Kind:     model.MissingFrontend,
		Service:  want.Service,
		Frontend: frontendPtr(fe),
		Detail: fmt.Sprintf("%s %s should %s but the node has no rule for it",
			strings.ReplaceAll(string(fe.Kind), "_", " "), fe, describeAction(want)),
		Evidence: want.Evidence,
	}
}

func staleFrontend(fe model.Frontend, got model.Verdict) model.Finding {
	name := got.Service.String()
	if name == "" {
		name = "an unknown service port"
	}
	return model.Finding{
		Kind:     model.StaleFrontend,
		Service:  got.Service,
		Frontend: frontendPtr(fe),
		Detail: fmt.Sprintf("node still programs %s %s (%s) for %s, which no longer exists",
			strings.ReplaceAll(string(fe.Kind), "_", " "), fe, describeAction(got), name),
		Evidence: got.Evidence,
	}
}

func describeAction(v model.Verdict) string {
	switch v.Action {
	case model.Forward:
		return fmt.Sprintf("forward to %d backend(s)", len(v.Backends))
	case model.Reject:
		return "reject (no endpoints)"
	case model.Drop:
		return "drop (no local endpoints)"
	}
	return string(v.Action)
}

func compareVerdicts(fe model.Frontend, want, got model.Verdict, mode string) []model.Finding {
	svc := want.Service
	if !sameAction(want.Action, got.Action, mode) {
		return []model.Finding{{
			Kind:     model.WrongVerdict,
			Service:  svc,
			Frontend: frontendPtr(fe),
			Detail:   fmt.Sprintf("should %s, node does %s", describeAction(want), describeAction(got)),
			Evidence: append(append([]string(nil), want.Evidence...), got.Evidence...),
		}}
	}
	if want.Action != model.Forward {
		return nil
	}
	var out []model.Finding
	for _, b := range got.Backends {
		if !want.HasBackend(b) {
			out = append(out, model.Finding{
				Kind: model.StaleBackend, Service: svc, Frontend: frontendPtr(fe), Backend: b,
				Detail:   staleReason(want, b),
				Evidence: got.Evidence,
			})
		}
	}
	for _, b := range want.Backends {
		if !got.HasBackend(b) {
			out = append(out, model.Finding{
				Kind: model.MissingBackend, Service: svc, Frontend: frontendPtr(fe), Backend: b,
				Detail:   "endpoint " + b.String() + " should receive traffic but the node has no rule for it",
				Evidence: want.Evidence,
			})
		}
	}
	return out
}

// staleReason explains why a programmed backend should not get traffic.
func staleReason(want model.Verdict, b netip.AddrPort) string {
	if ep, ok := want.Endpoint(b); ok {
		return fmt.Sprintf("backend %s still programmed but should not get traffic: %s", b, ep.Reason)
	}
	for _, ep := range want.Endpoints {
		if ep.Addr.Addr() == b.Addr() {
			return fmt.Sprintf("backend %s still programmed but the endpoint now uses port %d", b, ep.Addr.Port())
		}
	}
	return fmt.Sprintf("backend %s still programmed but the endpoint no longer exists (deleted)", b)
}

// sameAction compares actions. IPVS cannot express drop: kube-proxy's IPVS
// mode leaves a virtual server without real servers both for "no endpoints"
// (reject) and for "no local endpoints" under a Local policy (drop). Cilium
// likewise gives a frontend without a selectable backend its one
// no-backend response, whatever the traffic policy.
func sameAction(want, got model.Action, mode string) bool {
	if want == got {
		return true
	}
	noBackends := func(a model.Action) bool { return a == model.Reject || a == model.Drop }
	return (mode == model.ModeIPVS || mode == model.ModeCilium) && noBackends(want) && noBackends(got)
}
