package drift

import (
	"net/netip"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

var (
	sp  = model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "cart"}, Port: "grpc", Protocol: model.TCP}
	fe  = model.NewFrontend(netip.MustParseAddr("10.97.0.10"), 80, model.TCP, model.ClusterIP)
	np  = model.NewNodePort(30080, model.TCP, model.IPv4)
	be1 = netip.MustParseAddrPort("10.1.0.1:8080")
	be2 = netip.MustParseAddrPort("10.1.0.2:8080")
	be3 = netip.MustParseAddrPort("10.1.0.3:8080")
)

func fwd(bs ...netip.AddrPort) model.Verdict {
	return model.Verdict{Service: sp, Action: model.Forward, Backends: model.SortBackends(append([]netip.AddrPort(nil), bs...))}
}

func TestCompare(t *testing.T) {
	terminating := fwd(be1)
	terminating.Endpoints = []model.Endpoint{
		{Addr: be1, Ready: true, Included: true, Reason: "ready"},
		{Addr: be2, Terminating: true, Serving: true, Reason: "terminating (ready endpoints exist)"},
	}
	tests := []struct {
		name     string
		desired  map[model.Frontend]model.Verdict
		observed map[model.Frontend]model.Verdict
		want     []model.FindingKind
		backends []netip.AddrPort
		detail   string
	}{
		{name: "identical", desired: map[model.Frontend]model.Verdict{fe: fwd(be1, be2)},
			observed: map[model.Frontend]model.Verdict{fe: fwd(be2, be1)}},
		{name: "stale_backend_deleted", desired: map[model.Frontend]model.Verdict{fe: fwd(be1)},
			observed: map[model.Frontend]model.Verdict{fe: fwd(be1, be3)},
			want:     []model.FindingKind{model.StaleBackend}, backends: []netip.AddrPort{be3}, detail: "deleted"},
		{name: "stale_backend_terminating", desired: map[model.Frontend]model.Verdict{fe: terminating},
			observed: map[model.Frontend]model.Verdict{fe: fwd(be1, be2)},
			want:     []model.FindingKind{model.StaleBackend}, backends: []netip.AddrPort{be2}, detail: "terminating"},
		{name: "missing_backend", desired: map[model.Frontend]model.Verdict{fe: fwd(be1, be2)},
			observed: map[model.Frontend]model.Verdict{fe: fwd(be1)},
			want:     []model.FindingKind{model.MissingBackend}, backends: []netip.AddrPort{be2}},
		{name: "missing_frontend", desired: map[model.Frontend]model.Verdict{fe: fwd(be1), np: fwd(be1)},
			observed: map[model.Frontend]model.Verdict{fe: fwd(be1)},
			want:     []model.FindingKind{model.MissingFrontend}},
		{name: "stale_frontend", desired: map[model.Frontend]model.Verdict{},
			observed: map[model.Frontend]model.Verdict{fe: {Action: model.Reject}},
			want:     []model.FindingKind{model.StaleFrontend}},
		{name: "wrong_verdict_forward_instead_of_reject", desired: map[model.Frontend]model.Verdict{fe: {Service: sp, Action: model.Reject}},
			observed: map[model.Frontend]model.Verdict{fe: fwd(be1)},
			want:     []model.FindingKind{model.WrongVerdict}},
		{name: "wrong_verdict_drop_instead_of_forward", desired: map[model.Frontend]model.Verdict{fe: fwd(be1)},
			observed: map[model.Frontend]model.Verdict{fe: {Action: model.Drop}},
			want:     []model.FindingKind{model.WrongVerdict}},
		{name: "reject_matches_reject", desired: map[model.Frontend]model.Verdict{fe: {Service: sp, Action: model.Reject}},
			observed: map[model.Frontend]model.Verdict{fe: {Action: model.Reject}}},
		{name: "uncertain_never_reported", desired: map[model.Frontend]model.Verdict{fe: {Service: sp, Action: model.Forward, Uncertain: "unknown protocol"}},
			observed: map[model.Frontend]model.Verdict{}},
		{name: "stale_and_missing_together", desired: map[model.Frontend]model.Verdict{fe: fwd(be1, be2)},
			observed: map[model.Frontend]model.Verdict{fe: fwd(be2, be3)},
			want:     []model.FindingKind{model.MissingBackend, model.StaleBackend}, backends: []netip.AddrPort{be1, be3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(model.Desired{Frontends: tc.desired}, model.Observed{Frontends: tc.observed})
			if len(got) != len(tc.want) {
				t.Fatalf("got %d findings %+v, want kinds %v", len(got), got, tc.want)
			}
			for i, f := range got {
				if f.Kind != tc.want[i] {
					t.Errorf("finding %d kind %s, want %s", i, f.Kind, tc.want[i])
				}
				if tc.backends != nil && f.Backend != tc.backends[i] {
					t.Errorf("finding %d backend %s, want %s", i, f.Backend, tc.backends[i])
				}
				if f.Frontend == nil {
					t.Errorf("finding %d has no frontend", i)
				}
				if tc.detail != "" && !contains(f.Detail, tc.detail) {
					t.Errorf("detail %q does not mention %q", f.Detail, tc.detail)
				}
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestCompareIPVSRejectEqualsDrop(t *testing.T) {
	d := model.Desired{Frontends: map[model.Frontend]model.Verdict{fe: {Service: sp, Action: model.Drop}}}
	o := model.Observed{Frontends: map[model.Frontend]model.Verdict{fe: {Action: model.Reject}}}
	if got := Compare(d, o); len(got) != 1 || got[0].Kind != model.WrongVerdict {
		t.Fatalf("iptables: drop vs reject must differ, got %+v", got)
	}
	o.Datapath = model.ModeIPVS
	if got := Compare(d, o); len(got) != 0 {
		t.Fatalf("ipvs cannot tell drop from reject, got %+v", got)
	}
}

func TestCompareCiliumRejectEqualsDrop(t *testing.T) {
	d := model.Desired{Frontends: map[model.Frontend]model.Verdict{fe: {Service: sp, Action: model.Drop}}}
	o := model.Observed{Datapath: model.ModeCilium, Frontends: map[model.Frontend]model.Verdict{fe: {Action: model.Reject}}}
	if got := Compare(d, o); len(got) != 0 {
		t.Fatalf("cilium has one no-backend response, got %+v", got)
	}
}
