package watch

import (
	"sort"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
)

// summary renders verdicts as "kind ip:port/proto -> action backends", one
// line per frontend, for the frontends of services in namespace ns.
func summary(d model.Desired, ns string) []string {
	var out []string
	for _, fe := range model.SortedFrontends(d.Frontends) {
		v := d.Frontends[fe]
		if v.Service.Namespace != ns {
			continue
		}
		out = append(out, line(fe, v))
	}
	sort.Strings(out)
	return out
}

func line(fe model.Frontend, v model.Verdict) string {
	s := v.Service.String() + " " + string(fe.Kind) + " " + fe.String() + "/" + string(fe.Protocol) + " -> " + string(v.Action)
	for _, b := range v.Backends {
		s += " " + b.String()
	}
	if v.Uncertain != "" {
		s += " UNCERTAIN"
	}
	return s
}

// The converged fixture: what kube-proxy v1.37 programmed on worker-a
// (worker-a.iptables-save) and worker-b (worker-b.nft.json) for the shop
// namespace, written out by hand from those dumps.
var fixtureShop = map[string][]string{
	"worker-a": {
		"shop/cache:memcache cluster_ip 10.97.89.70:11211/TCP -> forward 10.214.1.61:11211 10.214.2.61:11211",
		"shop/cache:memcache-udp cluster_ip 10.97.89.70:11211/UDP -> forward 10.214.1.61:11211 10.214.2.61:11211",
		"shop/cart:grpc cluster_ip 10.97.233.167:9090/TCP -> forward 10.214.1.41:50051 10.214.2.41:50051",
		"shop/cart:metrics cluster_ip 10.97.233.167:9100/TCP -> forward 10.214.1.41:9100 10.214.2.41:9100",
		"shop/frontend:web cluster_ip 10.97.38.30:80/TCP -> forward 10.214.1.31:8080 10.214.2.31:8080",
		"shop/frontend:web load_balancer 192.0.2.100:80/TCP -> forward 10.214.1.31:8080",
		"shop/frontend:web node_port *:31080/TCP -> forward 10.214.1.31:8080",
		"shop/legacy:tcp cluster_ip 10.97.34.204:25/TCP -> forward 10.214.1.71:2525",
		"shop/legacy:tcp load_balancer 192.0.2.102:25/TCP -> forward 10.214.1.71:2525",
		"shop/legacy:tcp node_port *:31025/TCP -> forward 10.214.1.71:2525",
		"shop/payments:https cluster_ip 10.97.230.30:443/TCP -> reject",
		"shop/search:http cluster_ip 10.97.127.82:8080/TCP -> forward 10.214.1.51:8080",
		"shop/search:http external_ip 198.51.100.20:8080/TCP -> forward 10.214.1.51:8080 10.214.2.51:8080",
		"shop/search:http node_port *:31500/TCP -> forward 10.214.1.51:8080 10.214.2.51:8080",
	},
	"worker-b": {
		"shop/cache:memcache cluster_ip 10.97.89.70:11211/TCP -> forward 10.214.1.61:11211 10.214.2.61:11211",
		"shop/cache:memcache-udp cluster_ip 10.97.89.70:11211/UDP -> forward 10.214.1.61:11211 10.214.2.61:11211",
		"shop/cart:grpc cluster_ip 10.97.233.167:9090/TCP -> forward 10.214.1.41:50051 10.214.2.41:50051",
		"shop/cart:metrics cluster_ip 10.97.233.167:9100/TCP -> forward 10.214.1.41:9100 10.214.2.41:9100",
		"shop/frontend:web cluster_ip 10.97.38.30:80/TCP -> forward 10.214.1.31:8080 10.214.2.31:8080",
		"shop/frontend:web load_balancer 192.0.2.100:80/TCP -> forward 10.214.2.31:8080",
		"shop/frontend:web node_port *:31080/TCP -> forward 10.214.2.31:8080",
		"shop/legacy:tcp cluster_ip 10.97.34.204:25/TCP -> forward 10.214.1.71:2525",
		"shop/legacy:tcp load_balancer 192.0.2.102:25/TCP -> forward 10.214.1.71:2525",
		"shop/legacy:tcp node_port *:31025/TCP -> forward 10.214.1.71:2525",
		"shop/payments:https cluster_ip 10.97.230.30:443/TCP -> reject",
		"shop/search:http cluster_ip 10.97.127.82:8080/TCP -> forward 10.214.2.51:8080",
		"shop/search:http external_ip 198.51.100.20:8080/TCP -> forward 10.214.1.51:8080 10.214.2.51:8080",
		"shop/search:http node_port *:31500/TCP -> forward 10.214.1.51:8080 10.214.2.51:8080",
	},
}

func TestExpectedFixture(t *testing.T) {
	cs := loadListFile(t, fixture.Path(t, "cluster.json"))
	for node, want := range fixtureShop {
		t.Run(node, func(t *testing.T) {
			d := Expected(node, cs)
			if d.Node != node {
				t.Errorf("Node = %q", d.Node)
			}
			got := summary(d, "shop")
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("shop verdicts on %s:\ngot:\n%s\nwant:\n%s", node, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			checkFixtureReasons(t, d)
			checkBulk(t, d)
		})
	}
}

// checkFixtureReasons: excluded endpoints carry the reason kube-proxy skips them.
func checkFixtureReasons(t *testing.T, d model.Desired) {
	t.Helper()
	wantReason := []struct {
		svc, ep, reason string
		kind            model.FrontendKind
	}{
		{"shop/cart:grpc", "10.214.2.42:50051", reasonTermNotServing, model.ClusterIP},
		{"shop/frontend:web", "10.214.2.32:8080", reasonTermReadyExist, model.ClusterIP},
		{"shop/cache:memcache", "10.214.1.61:11211", reasonFallback, model.ClusterIP},
		{"shop/frontend:web", "10.214.2.31:8080", "", model.LoadBalancer}, // local on worker-b, not on worker-a
	}
	for _, w := range wantReason {
		v, ok := findVerdict(d, w.svc, w.kind)
		if !ok {
			t.Errorf("%s %s: no verdict", w.svc, w.kind)
			continue
		}
		e, ok := findEndpoint(v, w.ep)
		if !ok {
			t.Errorf("%s: endpoint %s not listed", w.svc, w.ep)
			continue
		}
		reason := w.reason
		if reason == "" {
			reason = map[string]string{"worker-a": reasonNotLocal, "worker-b": reasonReady}[d.Node]
		}
		if e.Reason != reason {
			t.Errorf("%s %s on %s: reason %q, want %q", w.svc, w.ep, d.Node, e.Reason, reason)
		}
	}
}

// checkBulk: the 110 bulk services forward to their 10 endpoints each.
func checkBulk(t *testing.T, d model.Desired) {
	t.Helper()
	n := 0
	for fe, v := range d.Frontends {
		if v.Service.Namespace != "bulk" {
			continue
		}
		n++
		if v.Action != model.Forward || len(v.Backends) != 10 || v.Uncertain != "" {
			t.Errorf("bulk %s: %s", fe, line(fe, v))
		}
	}
	if n != 110 {
		t.Errorf("bulk frontends = %d, want 110", n)
	}
	for fe, v := range d.Frontends {
		if v.Service.Name == "proxied" || fe.IP.String() == "192.0.2.101" {
			t.Errorf("frontend kube-proxy does not program: %s", line(fe, v))
		}
	}
}

func findVerdict(d model.Desired, svc string, kind model.FrontendKind) (model.Verdict, bool) {
	for _, fe := range model.SortedFrontends(d.Frontends) {
		if v := d.Frontends[fe]; v.Service.String() == svc && fe.Kind == kind {
			return v, true
		}
	}
	return model.Verdict{}, false
}

func findEndpoint(v model.Verdict, addr string) (model.Endpoint, bool) {
	for _, e := range v.Endpoints {
		if e.Addr.String() == addr {
			return e, true
		}
	}
	return model.Endpoint{}, false
}

// The stale fixture's cluster: payments is gone and cart lost 10.214.1.41.
func TestExpectedStaleFixture(t *testing.T) {
	cs := loadListFile(t, fixture.Path(t, "stale.cluster.json"))
	d := Expected("worker-a", cs)
	if _, ok := findVerdict(d, "shop/payments:https", model.ClusterIP); ok {
		t.Error("shop/payments still expected after deletion")
	}
	v, ok := findVerdict(d, "shop/cart:grpc", model.ClusterIP)
	if !ok || len(v.Backends) != 1 || v.Backends[0].String() != "10.214.2.41:50051" {
		t.Errorf("shop/cart:grpc after removal: %+v", v.Backends)
	}
}
