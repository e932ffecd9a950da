package nftables

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

// Service ports and frontends of the hand-written tables (testdata/handwritten.*.nft).
var (
	nftLongPort        = model.ServicePort{ServiceName: model.ServiceName{Namespace: "team-" + strings.Repeat("x", 35), Name: "service-with-a-very-long-name-" + strings.Repeat("y", 30)}, Port: "port-name-" + strings.Repeat("z", 20), Protocol: model.TCP}
	nftHandwrittenOpts = model.Hints{
		ServicePorts: []model.ServicePort{
			{ServiceName: model.ServiceName{Namespace: "ns1", Name: "web"}, Port: "http", Protocol: model.TCP},
			{ServiceName: model.ServiceName{Namespace: "ns1", Name: "empty"}, Protocol: model.TCP},
			{ServiceName: model.ServiceName{Namespace: "ns1", Name: "itp-local"}, Port: "dns", Protocol: model.UDP},
			{ServiceName: model.ServiceName{Namespace: "ns2", Name: "etp-local"}, Port: "http", Protocol: model.TCP},
			nftLongPort,
		},
		Frontends: map[model.Frontend]model.ServicePort{
			model.NewFrontend(netip.MustParseAddr("203.0.113.7"), 80, model.TCP, model.LoadBalancer): {},
		},
	}
)

func nftParseHandwritten(t *testing.T, opts model.Hints) model.Observed {
	t.Helper()
	obs, err := ParseJSON(nftReadTestdata(t, "handwritten.v4.nft.json"), nftReadTestdata(t, "handwritten.v6.nft.json"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

type nftWant struct {
	fe       model.Frontend
	svc      model.ServicePort
	action   model.Action
	backends []string
}

func nftCheck(t *testing.T, obs model.Observed, wants []nftWant) {
	t.Helper()
	for _, w := range wants {
		v, ok := obs.Frontends[w.fe]
		if !ok {
			t.Errorf("%s %s/%s missing", w.fe.Kind, w.fe, w.fe.Protocol)
			continue
		}
		if v.Service != w.svc || v.Action != w.action {
			t.Errorf("%s: got %+v %s, want %+v %s", w.fe, v.Service, v.Action, w.svc, w.action)
		}
		var got []string
		for _, b := range v.Backends {
			got = append(got, b.String())
		}
		if strings.Join(got, ",") != strings.Join(w.backends, ",") {
			t.Errorf("%s: backends %v, want %v", w.fe, got, w.backends)
		}
	}
}

func TestParseNFTJSONHandwritten(t *testing.T) {
	obs := nftParseHandwritten(t, nftHandwrittenOpts)
	if len(obs.Warnings) != 0 {
		t.Errorf("unexpected warnings: %q", obs.Warnings)
	}
	ip := netip.MustParseAddr
	web := model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns1", Name: "web"}, Port: "http", Protocol: model.TCP}
	etp := model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns2", Name: "etp-local"}, Port: "http", Protocol: model.TCP}
	nftCheck(t, obs, []nftWant{
		// Affinity shortcuts are skipped; the numgen vmap lists every endpoint.
		{model.NewFrontend(ip("10.96.0.10"), 80, model.TCP, model.ClusterIP), web, model.Forward, []string{"10.1.0.5:8080", "10.1.1.6:8080"}},
		{model.NewFrontend(ip("10.96.0.11"), 443, model.TCP, model.ClusterIP), model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns1", Name: "empty"}, Protocol: model.TCP}, model.Reject, nil},
		{model.NewFrontend(ip("10.96.0.12"), 53, model.UDP, model.ClusterIP), model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns1", Name: "itp-local"}, Port: "dns", Protocol: model.UDP}, model.Drop, nil},
		{model.NewFrontend(ip("10.96.0.13"), 80, model.TCP, model.ClusterIP), etp, model.Forward, []string{"10.1.1.9:80"}},
		// externalTrafficPolicy Local without local endpoints: outside traffic
		// falls through the external chain and the no-endpoint maps drop it.
		{model.NewFrontend(ip("203.0.113.7"), 80, model.TCP, model.LoadBalancer), etp, model.Drop, nil},
		{model.NewNodePort(30007, model.TCP, model.IPv4), etp, model.Drop, nil},
		// Truncated chain name resolved by its hash.
		{model.NewFrontend(ip("10.96.0.14"), 8443, model.TCP, model.ClusterIP), nftLongPort, model.Forward, []string{"10.1.2.3:8443"}},
		// Dual stack: the ip6 table.
		{model.NewFrontend(ip("fd00:96::10"), 80, model.TCP, model.ClusterIP), web, model.Forward, []string{"[fd00:10::5]:8080", "[fd00:10::6]:8080"}},
		{model.NewNodePort(30080, model.TCP, model.IPv6), web, model.Forward, []string{"[fd00:10::5]:8080", "[fd00:10::6]:8080"}},
		{model.NewFrontend(ip("fd00:96::11"), 443, model.TCP, model.ClusterIP), model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns1", Name: "empty"}, Protocol: model.TCP}, model.Reject, nil},
	})
	if len(obs.Frontends) != 10 {
		t.Errorf("%d frontends, want 10", len(obs.Frontends))
	}
	// The stale chains (service-...-ns1/gone, endpoint 10.1.9.9) are not reachable.
	for fe, v := range obs.Frontends {
		if v.Service.Name == "gone" || v.HasBackend(netip.MustParseAddrPort("10.1.9.9:80")) {
			t.Errorf("%s: unreachable stale chain counted: %+v", fe, v)
		}
	}
	nftGolden(t, "handwritten.golden", nftRender(obs))
}

func TestParseNFTJSONHandwrittenWithoutOptions(t *testing.T) {
	obs := nftParseHandwritten(t, model.Hints{})
	ip := netip.MustParseAddr
	long := obs.Frontends[model.NewFrontend(ip("10.96.0.14"), 8443, model.TCP, model.ClusterIP)]
	if !long.Service.IsZero() || long.Action != model.Forward {
		t.Errorf("truncated chain without known ports: got %+v %s, want an unknown service that forwards", long.Service, long.Action)
	}
	// Without the API's frontends an LB IP cannot be told from an external IP.
	if _, ok := obs.Frontends[model.NewFrontend(ip("203.0.113.7"), 80, model.TCP, model.ExternalIP)]; !ok {
		t.Errorf("203.0.113.7 not guessed as external_ip")
	}
	joined := strings.Join(obs.Warnings, "\n")
	for _, w := range []string{"truncated", "guessed as external_ip"} {
		if !strings.Contains(joined, w) {
			t.Errorf("no warning mentioning %q in %q", w, obs.Warnings)
		}
	}
	nftGolden(t, "handwritten-noopts.golden", nftRender(obs))
}
