package cilium

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

func TestDesiredCiliumSemantics(t *testing.T) {
	a, b := netip.MustParseAddrPort("10.244.1.2:80"), netip.MustParseAddrPort("10.244.2.3:80")
	hinted := model.Verdict{Action: model.Forward, Backends: []netip.AddrPort{a}, Endpoints: []model.Endpoint{
		{Addr: a, Ready: true, Included: true, Reason: "ready"},
		{Addr: b, Ready: true, Reason: "topology: hinted for another zone"},
	}}
	local := model.Verdict{Action: model.Drop, Endpoints: []model.Endpoint{{Addr: b, Ready: true, Reason: "not local (Local policy)"}}}
	fe1 := model.NewFrontend(netip.MustParseAddr("10.96.0.1"), 80, model.TCP, model.ClusterIP)
	fe2 := model.NewNodePort(30080, model.TCP, model.IPv4)
	in := model.Desired{Node: "n1", Frontends: map[model.Frontend]model.Verdict{fe1: hinted, fe2: local}}

	out := Desired(in, Semantics{})
	if got := out.Frontends[fe1].Backends; !slices.Equal(got, []netip.AddrPort{a, b}) {
		t.Errorf("topology off: backends %v, want both", got)
	}
	if got := out.Frontends[fe2].Action; got != model.Drop {
		t.Errorf("Local with only remote endpoints: %s, want drop (compared as reject by drift in this mode)", got)
	}
	if len(in.Frontends[fe1].Backends) != 1 || in.Frontends[fe1].Endpoints[1].Included || in.Frontends[fe2].Action != model.Drop {
		t.Error("the input was modified")
	}
	kept := Desired(in, Semantics{ServiceTopology: true})
	if got := kept.Frontends[fe1].Backends; !slices.Equal(got, []netip.AddrPort{a}) {
		t.Errorf("topology on: backends %v, want the hinted one", got)
	}
}
