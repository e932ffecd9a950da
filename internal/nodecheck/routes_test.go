package nodecheck

import (
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

func TestHealthyLayoutsHaveNoFindings(t *testing.T) {
	wantMode := map[string]map[model.IPFamily]RouteMode{
		"host-gw":          {model.IPv4: RouteModePerNode},
		"flannel-vxlan":    {model.IPv4: RouteModePerNode},
		"calico-ipip":      {},
		"calico-vxlan":     {model.IPv4: RouteModeNone},
		"cilium-tunnel":    {model.IPv4: RouteModePerNode},
		"native-blackhole": {model.IPv4: RouteModePerNode},
		"dual-stack":       {model.IPv4: RouteModePerNode, model.IPv6: RouteModePerNode},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			in, cfg := l.fn()
			fs, info := Check(in, cfg, now)
			wantFindings(t, fs)
			if info.RoutesChecked == 0 {
				t.Errorf("no route checked; pod network %v (%s)", info.PodNetwork, info.PodNetworkSource)
			}
			if len(info.RouteModes) != len(wantMode[l.name]) {
				t.Errorf("route modes %+v, want %v", info.RouteModes, wantMode[l.name])
			}
			for fam, m := range wantMode[l.name] {
				if d := findDecision(info, fam); d.Mode != m || d.Reason == "" {
					t.Errorf("%s route mode %+v, want %s with a reason", fam, d, m)
				}
			}
		})
	}
}

// deleteNode removes node c from the cluster state, as kubectl delete node does.
func deleteNode(in Inputs, name string) Inputs {
	var keep []model.NodeInfo
	for _, n := range in.Nodes {
		if n.Name != name {
			keep = append(keep, n)
		}
	}
	in.Nodes = keep
	return in
}

func TestStaleRouteAfterNodeDeleted(t *testing.T) {
	want := map[string][]string{
		"host-gw":          {"stale_route 10.244.2.0/24 via 192.168.1.12 dev eth0"},
		"flannel-vxlan":    {"stale_route 10.244.2.0/24 via 10.244.2.0 dev flannel.1 onlink"},
		"calico-ipip":      {"stale_route 10.244.200.0/26 via 192.168.1.12 dev tunl0 onlink proto bird"},
		"calico-vxlan":     {"stale_route 10.244.200.0/26 via 10.244.200.0 dev vxlan.calico onlink proto 80"},
		"cilium-tunnel":    {"stale_route 10.0.2.0/24 via 10.0.0.79 dev cilium_host proto kernel"},
		"native-blackhole": {"stale_route 10.244.2.0/24 via 192.168.1.12 dev eth0"},
		// the IPv6 route goes via a link-local next hop: only its podCIDR tells.
		"dual-stack": {"stale_route 10.244.2.0/24 via 192.168.1.12 dev eth0",
			"stale_route fd00:10:244:2::/64 via fe80::c dev eth0"},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			in, cfg := l.fn()
			fs, _ := Check(deleteNode(in, "c"), cfg, now)
			wantFindings(t, fs, want[l.name]...)
		})
	}
}

func TestStaleRouteDetailNamesTheCause(t *testing.T) {
	in, cfg := hostGW()
	fs, _ := Check(deleteNode(in, "c"), cfg, now)
	if len(fs) != 1 || !strings.Contains(fs[0].Detail, "192.168.1.12, which is the address of no existing node") {
		t.Fatalf("detail: %s", details(fs))
	}
	if fs[0].Scope != "" || fs[0].Frontend != nil {
		t.Errorf("route finding must be node-scoped without frontend: %+v", fs[0])
	}
}

func TestStaleRouteGatewayReusedPerNode(t *testing.T) {
	// Node c was deleted and its IP handed to a new node d with another podCIDR:
	// the old route's gateway is a live node, but its destination is no podCIDR.
	in, cfg := hostGW()
	in = deleteNode(in, "c")
	in.Nodes = append(in.Nodes, node("d", "10.244.3.0/24", "192.168.1.12"))
	in.Snapshot.Routes = append(in.Snapshot.Routes, via("10.244.3.0/24", "192.168.1.12", "eth0"))
	fs, _ := Check(in, cfg, now)
	wantFindings(t, fs, "stale_route 10.244.2.0/24 via 192.168.1.12 dev eth0")
	if !strings.Contains(fs[0].Detail, "matches no existing node's podCIDR") {
		t.Errorf("detail %q", fs[0].Detail)
	}
	// Under route mode none (e.g. block IPAM) the same route is not judged by its destination.
	cfg.RouteMode = RouteModeNone
	fs, _ = Check(in, cfg, now)
	wantFindings(t, fs)
}

func TestBlackholeRoutes(t *testing.T) {
	cases := []struct {
		name  string
		route model.Route
		want  []string
	}{
		{"local podCIDR", reject(model.RouteBlackhole, "10.244.0.0/24", "static"), nil},
		{"inside local podCIDR", reject(model.RouteUnreachable, "10.244.0.128/25", "static"), nil},
		{"old podCIDR of this node", reject(model.RouteBlackhole, "10.244.9.0/24", "static"),
			[]string{"stale_route blackhole 10.244.9.0/24 proto static"}},
		{"calico empty block", reject(model.RouteBlackhole, "10.244.9.0/26", "bird"), nil},
		{"prohibit old range", reject(model.RouteProhibit, "10.244.9.0/24", "kernel"),
			[]string{"stale_route prohibit 10.244.9.0/24 proto kernel"}},
		{"outside pod network", reject(model.RouteBlackhole, "172.16.0.0/24", "static"), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, cfg := hostGW()
			in.Snapshot.Routes = append(in.Snapshot.Routes, c.route)
			fs, _ := Check(in, cfg, now)
			wantFindings(t, fs, c.want...)
		})
	}
}

func TestRoutesNotJudged(t *testing.T) {
	// Aggregates, the node network, other tables and non-pod ranges are never stale.
	in, cfg := hostGW()
	in.Snapshot.Routes = append(in.Snapshot.Routes,
		via("10.244.0.0/16", "192.168.1.99", "eth0"), // aggregate of podCIDRs
		via("172.17.0.0/16", "", "docker0"),          // not the pod network
		via("10.96.0.0/12", "192.168.1.99", "eth0"),  // service range
		model.Route{Dst: pfx("10.244.9.0/24"), Type: model.RouteUnicast, Table: 100, Gateway: addr("192.168.1.99"), Dev: "eth0"},
		via("0.0.0.0/0", "192.168.1.99", "eth0"),
	)
	fs, info := Check(in, cfg, now)
	wantFindings(t, fs)
	if info.PodNetworkSource != "inferred from node podCIDRs" || info.PodNetwork[0].String() != "10.244.0.0/16" {
		t.Errorf("pod network %v (%s)", info.PodNetwork, info.PodNetworkSource)
	}
}

func TestExtraGateway(t *testing.T) {
	in, cfg := calicoIPIP()
	in.Snapshot.Routes = append(in.Snapshot.Routes, via("10.244.128.0/26", "192.168.1.254", "eth0"))
	fs, _ := Check(in, cfg, now)
	wantFindings(t, fs, "stale_route 10.244.128.0/26 via 192.168.1.254 dev eth0")
	cfg.ExtraGateways = addrs("192.168.1.254")
	fs, _ = Check(in, cfg, now)
	wantFindings(t, fs)
}

func TestMultipathRoute(t *testing.T) {
	in, cfg := calicoIPIP()
	in.Snapshot.Routes = append(in.Snapshot.Routes, model.Route{Dst: pfx("10.244.150.0/26"), Type: model.RouteUnicast,
		Table: model.MainTable, Protocol: "bird", NextHops: []model.NextHop{
			{Gateway: addr("192.168.1.11"), Dev: "tunl0", OnLink: true},
			{Gateway: addr("192.168.1.13"), Dev: "tunl0", OnLink: true}}})
	fs, _ := Check(in, cfg, now)
	wantFindings(t, fs, "stale_route 10.244.150.0/26 nexthop via 192.168.1.11 dev tunl0 onlink nexthop via 192.168.1.13 dev tunl0 onlink proto bird")
}

func removeRoute(in Inputs, dst string) Inputs {
	var keep []model.Route
	for _, r := range in.Snapshot.Routes {
		if r.Dst != pfx(dst) {
			keep = append(keep, r)
		}
	}
	in.Snapshot.Routes = keep
	return in
}

func TestMissingRoute(t *testing.T) {
	cases := []struct {
		name   string
		layout func() (Inputs, Config)
		mode   RouteMode
		remove string
		drop   string // node to delete first
		want   []string
		decide RouteMode
	}{
		{"host-gw auto", hostGW, "", "10.244.1.0/24", "",
			[]string{"missing_route 10.244.1.0/24 (node b)"}, RouteModePerNode},
		{"host-gw forced none", hostGW, RouteModeNone, "10.244.1.0/24", "", nil, RouteModeNone},
		{"two nodes auto cannot tell", hostGW, "", "10.244.1.0/24", "c", nil, RouteModeNone},
		{"two nodes forced per-node", hostGW, RouteModePerNode, "10.244.1.0/24", "c",
			[]string{"missing_route 10.244.1.0/24 (node b)"}, RouteModePerNode},
		{"vxlan auto", flannelVXLAN, "", "10.244.2.0/24", "",
			[]string{"missing_route 10.244.2.0/24 (node c)"}, RouteModePerNode},
		{"calico never per-node", calicoVXLAN, "", "10.244.100.0/26", "", nil, RouteModeNone},
		{"ipv6", dualStack, "", "fd00:10:244:1::/64", "",
			[]string{"missing_route fd00:10:244:1::/64 (node b)"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, cfg := c.layout()
			cfg.RouteMode = c.mode
			if c.drop != "" {
				in = deleteNode(in, c.drop)
				in = removeRoute(in, "10.244.2.0/24")
			}
			fs, info := Check(removeRoute(in, c.remove), cfg, now)
			wantFindings(t, fs, c.want...)
			if d := findDecision(info, model.IPv4); c.decide != "" && d.Mode != c.decide {
				t.Errorf("decision %+v, want %s", d, c.decide)
			}
		})
	}
}

func TestMissingRouteSkipsGoneNodes(t *testing.T) {
	in, cfg := hostGW()
	in.Nodes[1].Ready = false
	in.Nodes[1].ReadySince = now.Add(-10 * time.Minute)
	fs, _ := Check(removeRoute(in, "10.244.1.0/24"), cfg, now)
	wantFindings(t, fs)
	in.Nodes[1].ReadySince = now.Add(-time.Minute) // NotReady but not gone yet
	cfg.RouteMode = RouteModePerNode
	fs, _ = Check(removeRoute(in, "10.244.1.0/24"), cfg, now)
	wantFindings(t, fs, "missing_route 10.244.1.0/24 (node b)")
}

func TestRouteRulesSkippedWithoutPodNetwork(t *testing.T) {
	in := Inputs{NodeName: "a", Nodes: threeNodes("", "", ""),
		Snapshot: &model.NodeSnapshot{Routes: commonRoutes(), Links: baseLinks()}}
	fs, info := Check(in, Config{}, now)
	wantFindings(t, fs)
	if len(info.Skipped) == 0 || !strings.Contains(info.Skipped[0], "pod network unknown") {
		t.Errorf("skipped %q", info.Skipped)
	}
}

func TestInferCover(t *testing.T) {
	cases := []struct{ in, want string }{
		{"10.244.0.0/24", "10.244.0.0/16"},
		{"10.244.0.0/24,10.244.1.0/24", "10.244.0.0/16"},
		{"10.244.0.0/24,10.245.3.0/24", "10.244.0.0/15"},
		{"10.1.0.0/26,10.1.0.64/26", "10.1.0.0/18"},
		{"10.244.0.7/32,10.244.200.9/32", "10.244.0.0/16"},
		{"fd00:10:244::/64,fd00:10:244:1::/64,10.0.0.0/24", "10.0.0.0/16,fd00:10:244::/56"},
	}
	for _, c := range cases {
		var got []string
		for _, p := range inferCover(prefixes(strings.Split(c.in, ",")...)) {
			got = append(got, p.String())
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("inferCover(%s) = %v, want %s", c.in, got, c.want)
		}
	}
}

func TestRouteString(t *testing.T) {
	cases := []struct {
		r    model.Route
		want string
	}{
		{via("10.244.1.0/24", "192.168.1.11", "eth0"), "10.244.1.0/24 via 192.168.1.11 dev eth0"},
		{onlink(via("10.244.1.0/24", "10.244.1.0", "flannel.1")), "10.244.1.0/24 via 10.244.1.0 dev flannel.1 onlink"},
		{reject(model.RouteBlackhole, "10.244.0.0/24", "bird"), "blackhole 10.244.0.0/24 proto bird"},
		{model.Route{Dst: pfx("10.0.0.0/8"), Type: model.RouteUnicast, Table: 100, Dev: "wg0"}, "10.0.0.0/8 dev wg0 table 100"},
	}
	for _, c := range cases {
		if got := c.r.String(); got != c.want {
			t.Errorf("got %q want %q", got, c.want)
		}
	}
}

func TestParseRouteMode(t *testing.T) {
	for in, want := range map[string]RouteMode{"": RouteModeAuto, "auto": RouteModeAuto, "per-node": RouteModePerNode, "none": RouteModeNone} {
		if got, err := ParseRouteMode(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseRouteMode("pernode"); err == nil || !strings.Contains(err.Error(), `"pernode"`) {
		t.Errorf("want a clear error, got %v", err)
	}
}
