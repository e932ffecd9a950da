package nftables

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
)

func TestParseNFTJSONFixtures(t *testing.T) {
	for _, tc := range []struct{ dump, cluster, golden string }{
		{"worker-b.nft.json", "cluster.json", "worker-b.golden"},
		{"worker-b.nft.json", "stale.cluster.json", "stale.worker-b.golden"},
	} {
		t.Run(tc.dump, func(t *testing.T) {
			opts := nftOptionsFromCluster(t, fixture.Path(t, tc.cluster))
			obs, err := ParseJSON(nftReadTestdata(t, tc.dump), nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			if obs.Datapath != model.ModeNFTables {
				t.Errorf("datapath %q", obs.Datapath)
			}
			if len(obs.Warnings) != 0 {
				t.Errorf("warnings on a converged kube-proxy table: %q", obs.Warnings)
			}
			nftGolden(t, tc.golden, nftRender(obs))
		})
	}
}

// TestParseNFTJSONFixtureVerdicts spells out the fixture's key answers so a
// wrong golden file cannot hide them.
func TestParseNFTJSONFixtureVerdicts(t *testing.T) {
	opts := nftOptionsFromCluster(t, fixture.Path(t, "cluster.json"))
	obs, err := ParseJSON(nftReadTestdata(t, "worker-b.nft.json"), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr
	ap := netip.MustParseAddrPort
	cases := []struct {
		fe       model.Frontend
		svc      string
		action   model.Action
		backends []string
	}{
		{model.NewFrontend(ip("10.97.0.1"), 443, model.TCP, model.ClusterIP), "default/kubernetes:https", model.Forward, []string{"10.213.0.1:16443"}},
		{model.NewFrontend(ip("10.97.233.167"), 9090, model.TCP, model.ClusterIP), "shop/cart:grpc", model.Forward, []string{"10.214.1.41:50051", "10.214.2.41:50051"}},
		{model.NewFrontend(ip("10.97.89.70"), 11211, model.UDP, model.ClusterIP), "shop/cache:memcache-udp", model.Forward, []string{"10.214.1.61:11211", "10.214.2.61:11211"}},
		{model.NewFrontend(ip("10.97.230.30"), 443, model.TCP, model.ClusterIP), "shop/payments:https", model.Reject, nil},
		// externalTrafficPolicy Local: traffic from outside reaches only the local endpoint.
		{model.NewFrontend(ip("192.0.2.100"), 80, model.TCP, model.LoadBalancer), "shop/frontend:web", model.Forward, []string{"10.214.2.31:8080"}},
		{model.NewNodePort(31080, model.TCP, model.IPv4), "shop/frontend:web", model.Forward, []string{"10.214.2.31:8080"}},
		{model.NewFrontend(ip("10.97.38.30"), 80, model.TCP, model.ClusterIP), "shop/frontend:web", model.Forward, []string{"10.214.1.31:8080", "10.214.2.31:8080"}},
		// internalTrafficPolicy Local: the cluster IP goes to the local chain.
		{model.NewFrontend(ip("10.97.127.82"), 8080, model.TCP, model.ClusterIP), "shop/search:http", model.Forward, []string{"10.214.2.51:8080"}},
		{model.NewFrontend(ip("198.51.100.20"), 8080, model.TCP, model.ExternalIP), "shop/search:http", model.Forward, []string{"10.214.1.51:8080", "10.214.2.51:8080"}},
		{model.NewFrontend(ip("192.0.2.102"), 25, model.TCP, model.LoadBalancer), "shop/legacy:tcp", model.Forward, []string{"10.214.1.71:2525"}},
	}
	for _, c := range cases {
		v, ok := obs.Frontends[c.fe]
		if !ok {
			t.Errorf("%s %s missing", c.fe.Kind, c.fe)
			continue
		}
		if v.Service.String() != c.svc || v.Action != c.action {
			t.Errorf("%s: got %s %s, want %s %s", c.fe, v.Service, v.Action, c.svc, c.action)
		}
		var want []netip.AddrPort
		for _, b := range c.backends {
			want = append(want, ap(b))
		}
		if len(want) != len(v.Backends) {
			t.Errorf("%s: backends %v, want %v", c.fe, v.Backends, want)
			continue
		}
		for i := range want {
			if want[i] != v.Backends[i] {
				t.Errorf("%s: backends %v, want %v", c.fe, v.Backends, want)
				break
			}
		}
		if len(v.Evidence) == 0 {
			t.Errorf("%s: no evidence", c.fe)
		}
	}
	// 1 kubernetes + 110 bulk + shop: cart 2, cache 2, payments 1,
	// frontend 3 (cluster, LB, node port), search 3, legacy 3.
	if got, want := len(obs.Frontends), 1+110+2+2+1+3+3+3; got != want {
		t.Errorf("%d frontends, want %d", got, want)
	}
}

func TestParseNFTJSONErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, has string }{
		{"syntax", "{\n  \"nftables\": [\n    {\"table\": }\n]}", "line 3"},
		{"type", `{"nftables": {"a": 1}}`, "line 1"},
		{"map element", `{"nftables": [{"map": {"family": "ip", "table": "kube-proxy", "name": "service-ips", "elem": [[1]]}}]}`, "nftables[0]: map service-ips: element 0"},
		{"bad dnat", `{"nftables": [{"rule": {"family": "ip", "table": "kube-proxy", "chain": "c", "handle": 7, "expr": [{"dnat": {"addr": "not-an-ip"}}]}}]}`, "rule 7 in chain c"},
		{"goto without target", `{"nftables": [{"rule": {"family": "ip", "table": "kube-proxy", "chain": "c", "handle": 8, "expr": [{"goto": {}}]}}]}`, "without target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJSON([]byte(tc.in), nil, model.Hints{})
			if err == nil || !strings.Contains(err.Error(), tc.has) {
				t.Errorf("error %v, want one containing %q", err, tc.has)
			}
		})
	}
}

func TestParseNFTJSONNoTables(t *testing.T) {
	obs, err := ParseJSON(nil, []byte(" \n"), model.Hints{})
	if err != nil || obs.Datapath != model.ModeNFTables || len(obs.Frontends) != 0 || len(obs.Warnings) != 1 {
		t.Errorf("got %+v, %v", obs, err)
	}
	// A dump of another table is not kube-proxy's.
	obs, err = ParseJSON([]byte(`{"nftables": [{"table": {"family": "ip", "name": "filter"}}]}`), nil, model.Hints{})
	if err != nil || len(obs.Warnings) != 1 || !strings.Contains(obs.Warnings[0], "no table") {
		t.Errorf("got %+v, %v", obs, err)
	}
}

// nftTestTable builds a table from chains given as rules, for the evaluator.
func nftTestTable(chains map[string][]nftRule) *nftTable {
	t := newNFTTable(model.IPv4)
	for n, rs := range chains {
		for i := range rs {
			rs[i].normalize()
		}
		t.Chains[n] = rs
	}
	return t
}

func mustAddrPorts(s ...string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, x := range s {
		out = append(out, netip.MustParseAddrPort(x))
	}
	return out
}
