package nodecheck

import (
	"path/filepath"
	"strings"
	"testing"

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
