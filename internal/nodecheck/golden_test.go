package nodecheck

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/golden"
)

// render prints findings and decisions the way an SRE reads them.
func render(fsInfo func() ([]string, Info)) string {
	lines, info := fsInfo()
	var b strings.Builder
	for _, d := range info.RouteModes {
		b.WriteString("route mode " + string(d.Family) + ": " + string(d.Mode) + " (" + d.Reason + ")\n")
	}
	for _, s := range info.Skipped {
		b.WriteString("skipped: " + s + "\n")
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// TestGoldenFindings pins the wording of every finding kind in one broken
// layout each.
func TestGoldenFindings(t *testing.T) {
	cases := map[string]func() Inputs{
		"host-gw-node-deleted": func() Inputs { in, _ := hostGW(); return deleteNode(in, "c") },
		"flannel-route-missing": func() Inputs {
			in, _ := flannelVXLAN()
			return removeRoute(in, "10.244.1.0/24")
		},
		"calico-pod-deleted": func() Inputs {
			in, _ := calicoIPIP()
			in = deletePod(in, "web-1")
			in.Snapshot.Links[3].OperState = "lowerlayerdown"
			return in
		},
		"conntrack-and-endpoints": func() Inputs {
			in, _ := hostGW()
			in.Desired = testDesired()
			in.Snapshot.Flows = testFlows()
			in.Endpoints = []model.EndpointInfo{ep("shop/cart", "cart-abc", "10.244.9.3", "d", true)}
			in.ServicesKnown = true
			in.ServiceIPs = addrs("10.96.0.10")
			in.Snapshot.Links = append(in.Snapshot.Links, link("kube-ipvs0", "dummy", "10.96.0.10/32", "10.96.7.7/32"))
			return in
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			_, cfg := hostGW()
			if strings.HasPrefix(name, "calico") {
				_, cfg = calicoIPIP()
			}
			got := render(func() ([]string, Info) {
				fs, info := Check(mk(), cfg, now)
				var lines []string
				for _, f := range fs {
					head := string(f.Kind)
					if f.Scope != "" {
						head += " [" + f.Scope + "]"
					}
					if !f.Service.IsZero() {
						head += " " + f.Service.String()
					}
					lines = append(lines, head+" | "+f.Subject+"\n  "+f.Detail)
					for _, e := range f.Evidence {
						lines = append(lines, "    - "+e)
					}
				}
				return lines, info
			})
			golden.Check(t, filepath.Join("testdata", name+".golden"), []byte(got))
		})
	}
}

// TestEndpointsBySliceSameFindings: endpoints handed per slice
// (EndpointsBySlice, as the agent's cached inputs are) give the findings a
// flat list gives.
func TestEndpointsBySliceSameFindings(t *testing.T) {
	eps := []model.EndpointInfo{ep("shop/cart", "cart-abc", "10.244.9.3", "d", true), ep("shop/cart", "cart-abc", "10.244.9.4", "d", false),
		ep("shop/web", "web-x", "10.244.9.5", "d", true)}
	flat, cfg := hostGW()
	flat.Desired, flat.Snapshot.Flows, flat.Endpoints = testDesired(), testFlows(), eps
	bySlice, _ := hostGW()
	bySlice.Desired, bySlice.Snapshot.Flows = testDesired(), testFlows()
	bySlice.Endpoints, bySlice.EndpointsBySlice = eps[:1], [][]model.EndpointInfo{eps[1:2], eps[2:]}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	want, _ := Check(flat, cfg, now)
	got, _ := Check(bySlice, cfg, now)
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("per slice: %d findings %+v\nflat: %d findings %+v", len(got), got, len(want), want)
	}
}
