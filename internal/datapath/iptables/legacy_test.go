package iptables

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

const corpus = "../../../testdata/captures/"

// Issue 12 item 7: kube-proxy v1.20–v1.23's KUBE-XLB chains are read as
// kube-proxy meant them: external traffic skips the pod/LOCAL-source
// short-circuits, and "has no local endpoints" -j KUBE-MARK-DROP is a drop.
func TestParseXLBLayout(t *testing.T) {
	data, err := os.ReadFile(corpus + "kube-proxy-v1.23-xlb-local-policy/test-hostname.iptables-save")
	if err != nil {
		t.Fatal(err)
	}
	obs, err := Parse(Dumps{IPv4: data}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	lb := model.NewFrontend(netip.MustParseAddr("1.2.3.4"), 80, model.TCP, model.LoadBalancer)
	np2 := model.NewNodePort(3001, model.TCP, model.IPv4)
	np7 := model.NewNodePort(3007, model.TCP, model.IPv4)
	cip2 := model.NewFrontend(netip.MustParseAddr("172.30.0.42"), 80, model.TCP, model.ClusterIP)
	for _, fe := range []model.Frontend{lb, np2} {
		if v := obs.Frontends[fe]; v.Action != model.Drop || len(v.Backends) != 0 {
			t.Errorf("%s: %s %v, want drop (no local endpoints)", fe, v.Action, v.Backends)
		}
	}
	if v := obs.Frontends[np7]; v.Action != model.Forward || len(v.Backends) != 1 || v.Backends[0] != netip.MustParseAddrPort("10.180.0.7:80") {
		t.Errorf("%s: %s %v, want forward to the local endpoint only", np7, v.Action, v.Backends)
	}
	if v := obs.Frontends[cip2]; v.Action != model.Forward || len(v.Backends) != 1 {
		t.Errorf("cluster IP %s: %s %v, want forward to every endpoint", cip2, v.Action, v.Backends)
	}
	if len(obs.Warnings) != 0 {
		t.Errorf("warnings: %q", obs.Warnings)
	}
}

// Issue 12 item 7: v1.12 and older hashed an unnamed port's name with its
// trailing colon; that is kube-proxy's own chain, not a mismatch.
func TestParseLegacyUnnamedPortHash(t *testing.T) {
	data, err := os.ReadFile(corpus + "kube-proxy-v1.12-unnamed-port/test-hostname.iptables-save")
	if err != nil {
		t.Fatal(err)
	}
	obs, err := Parse(Dumps{IPv4: data}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(obs.Warnings, "\n"), "is not its chain") {
		t.Errorf("false hash warning: %q", obs.Warnings)
	}
	fe := model.NewFrontend(netip.MustParseAddr("172.30.0.48"), 80, model.TCP, model.ClusterIP)
	if v := obs.Frontends[fe]; v.Service.Name != "svc8" || v.Service.Port != "" || len(v.Backends) != 1 {
		t.Errorf("%s: %+v", fe, v)
	}
	if got := legacyChainHash(model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns8", Name: "svc8"}, Protocol: model.TCP}); got != "YGD7L4GN4VNAQPM2" {
		t.Errorf("legacy hash %s", got)
	}
}
