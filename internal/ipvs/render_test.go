package ipvs

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
	goldenfile "github.com/netdrift/netdrift/internal/testutil/golden"
)

type goldenFrontend struct {
	Frontend string   `json:"frontend"`
	Kind     string   `json:"kind"`
	Protocol string   `json:"protocol"`
	Family   string   `json:"family"`
	Service  string   `json:"service,omitempty"`
	Action   string   `json:"action"`
	Backends []string `json:"backends,omitempty"`
	Evidence []string `json:"evidence"`
}

type goldenObserved struct {
	Datapath  string           `json:"datapath"`
	Frontends []goldenFrontend `json:"frontends"`
	Warnings  []string         `json:"warnings,omitempty"`
}

// render prints an Observed in a stable JSON form for golden files.
func render(t *testing.T, o model.Observed) []byte {
	t.Helper()
	g := goldenObserved{Datapath: o.Datapath, Warnings: o.Warnings, Frontends: []goldenFrontend{}}
	for _, f := range model.SortedFrontends(o.Frontends) {
		v := o.Frontends[f]
		gf := goldenFrontend{
			Frontend: f.String(), Kind: string(f.Kind), Protocol: string(f.Protocol),
			Family: string(f.Family), Service: v.Service.String(), Action: string(v.Action),
			Evidence: v.Evidence,
		}
		for _, b := range v.Backends {
			gf.Backends = append(gf.Backends, b.String())
		}
		g.Frontends = append(g.Frontends, gf)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// golden compares got with testdata/name, rewriting it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got)
}

// kubeProxyHints is what the desired state would say about the VIPs in
// testdata/kube-proxy.save.
func kubeProxyHints() model.Hints {
	cart := model.NewFrontend(netip.MustParseAddr("10.97.12.7"), 80, model.TCP, model.ClusterIP)
	np := model.NewNodePort(30080, model.TCP, model.IPv4)
	return model.Hints{Frontends: map[model.Frontend]model.ServicePort{
		cart: {ServiceName: model.ServiceName{Namespace: "shop", Name: "cart"}, Port: "grpc", Protocol: model.TCP},
		np:   {ServiceName: model.ServiceName{Namespace: "shop", Name: "search"}, Port: "http", Protocol: model.TCP},
		model.NewFrontend(netip.MustParseAddr("192.0.2.10"), 80, model.TCP, model.ExternalIP):    {},
		model.NewFrontend(netip.MustParseAddr("203.0.113.7"), 80, model.TCP, model.LoadBalancer): {},
	}}
}

func kubeProxyOptions() Options { return OptionsFor(kubeProxyHints()) }
