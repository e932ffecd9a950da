package iptables

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

func v4(t testing.TB, name string) Dumps {
	return Dumps{IPv4: readTestdata(t, name)}
}

// largeClusterOptions is what a caller knows for large-cluster.iptables-save.
func largeClusterOptions() model.Hints {
	lb := model.NewFrontend(netip.MustParseAddr("198.51.100.3"), 443, model.TCP, model.LoadBalancer)
	rej := model.NewFrontend(netip.MustParseAddr("10.96.20.6"), 80, model.TCP, model.ClusterIP)
	return model.Hints{
		ServicePorts: []model.ServicePort{
			{ServiceName: model.ServiceName{Namespace: "big", Name: "a"}, Port: "http", Protocol: model.TCP},
			{ServiceName: model.ServiceName{Namespace: "big", Name: "b"}, Protocol: model.UDP},
			{ServiceName: model.ServiceName{Namespace: "big", Name: "lb"}, Port: "web", Protocol: model.TCP},
			{ServiceName: model.ServiceName{Namespace: "big", Name: "ext"}, Port: "http", Protocol: model.TCP},
			{ServiceName: model.ServiceName{Namespace: "big", Name: "a"}, Port: "http", Protocol: model.UDP}, // same name, other protocol: other hash
		},
		Frontends: map[model.Frontend]model.ServicePort{
			lb:  {ServiceName: model.ServiceName{Namespace: "big", Name: "lb"}, Port: "web", Protocol: model.TCP},
			rej: {ServiceName: model.ServiceName{Namespace: "big", Name: "none"}, Port: "http", Protocol: model.TCP},
		},
	}
}

func TestParseIPTablesGolden(t *testing.T) {
	cases := []struct {
		name  string
		dumps Dumps
		opts  model.Hints
	}{
		{"worker-a", v4(t, "worker-a.iptables-save"), model.Hints{}},
		{"stale.worker-a", v4(t, "stale.worker-a.iptables-save"), model.Hints{}},
		{"restore-input", v4(t, "restore-input.iptables"), model.Hints{}},
		{"restore-input.roundtrip", v4(t, "restore-input.roundtrip.iptables-save"), model.Hints{}},
		{"dualstack", Dumps{IPv4: readTestdata(t, "dualstack.v4.iptables-save"), IPv6: readTestdata(t, "dualstack.v6.iptables-save")}, model.Hints{}},
		{"large-cluster", v4(t, "large-cluster.iptables-save"), largeClusterOptions()},
		{"large-cluster.no-options", v4(t, "large-cluster.iptables-save"), model.Hints{}},
		{"stale-chains", v4(t, "stale-chains.iptables-save"), model.Hints{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs, err := Parse(tc.dumps, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.name+".golden", renderObserved(obs, nil))
		})
	}
}

// want is a compact expected verdict: "forward a:p b:p", "reject", "drop".
type want struct {
	svc     string
	verdict string
}

// verdictString renders a verdict compactly for exact assertions.
func verdictString(v model.Verdict) string {
	s := string(v.Action)
	for _, b := range v.Backends {
		s += " " + b.String()
	}
	return s
}

// frontendID renders a frontend as "kind ip:port/PROTO" ("node_port *:N/TCP IPv4").
func frontendID(f model.Frontend) string {
	s := string(f.Kind) + " " + f.String() + "/" + string(f.Protocol)
	if f.Kind == model.NodePort {
		s += " " + string(f.Family)
	}
	return s
}

// assertFrontends checks that the frontends selected by keep are exactly wantm.
func assertFrontends(t *testing.T, obs model.Observed, keep func(model.Frontend, model.Verdict) bool, wantm map[string]want) {
	t.Helper()
	got := map[string]want{}
	for f, v := range obs.Frontends {
		if keep == nil || keep(f, v) {
			got[frontendID(f)] = want{KubeProxyPortName(v.Service) + "/" + string(v.Service.Protocol), verdictString(v)}
		}
	}
	for id, w := range wantm {
		if got[id] != w {
			t.Errorf("%s: got %+v, want %+v", id, got[id], w)
		}
	}
	for id, g := range got {
		if _, ok := wantm[id]; !ok {
			t.Errorf("unexpected frontend %s: %+v", id, g)
		}
	}
}

func inNamespace(ns string) func(model.Frontend, model.Verdict) bool {
	return func(_ model.Frontend, v model.Verdict) bool { return v.Service.Namespace == ns }
}

// TestParseIPTablesWorkerA asserts, rule by rule, what worker-a's dump holds for shop/*.
func TestParseIPTablesWorkerA(t *testing.T) {
	obs, err := Parse(v4(t, "worker-a.iptables-save"), model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	if obs.Datapath != model.ModeIPTables {
		t.Errorf("datapath %q", obs.Datapath)
	}
	if len(obs.Warnings) != 0 {
		t.Errorf("unexpected warnings: %q", obs.Warnings)
	}
	assertFrontends(t, obs, inNamespace("shop"), map[string]want{
		"cluster_ip 10.97.38.30:80/TCP":      {"shop/frontend:web/TCP", "forward 10.214.1.31:8080 10.214.2.31:8080"},
		"load_balancer 192.0.2.100:80/TCP":   {"shop/frontend:web/TCP", "forward 10.214.1.31:8080"},
		"node_port *:31080/TCP IPv4":         {"shop/frontend:web/TCP", "forward 10.214.1.31:8080"},
		"cluster_ip 10.97.233.167:9090/TCP":  {"shop/cart:grpc/TCP", "forward 10.214.1.41:50051 10.214.2.41:50051"},
		"cluster_ip 10.97.233.167:9100/TCP":  {"shop/cart:metrics/TCP", "forward 10.214.1.41:9100 10.214.2.41:9100"},
		"cluster_ip 10.97.127.82:8080/TCP":   {"shop/search:http/TCP", "forward 10.214.1.51:8080"},
		"external_ip 198.51.100.20:8080/TCP": {"shop/search:http/TCP", "forward 10.214.1.51:8080 10.214.2.51:8080"},
		"node_port *:31500/TCP IPv4":         {"shop/search:http/TCP", "forward 10.214.1.51:8080 10.214.2.51:8080"},
		"cluster_ip 10.97.89.70:11211/TCP":   {"shop/cache:memcache/TCP", "forward 10.214.1.61:11211 10.214.2.61:11211"},
		"cluster_ip 10.97.89.70:11211/UDP":   {"shop/cache:memcache-udp/UDP", "forward 10.214.1.61:11211 10.214.2.61:11211"},
		"cluster_ip 10.97.230.30:443/TCP":    {"shop/payments:https/TCP", "reject"},
		"cluster_ip 10.97.34.204:25/TCP":     {"shop/legacy:tcp/TCP", "forward 10.214.1.71:2525"},
		"load_balancer 192.0.2.102:25/TCP":   {"shop/legacy:tcp/TCP", "forward 10.214.1.71:2525"},
		"node_port *:31025/TCP IPv4":         {"shop/legacy:tcp/TCP", "forward 10.214.1.71:2525"},
	})
	// bulk: 110 services, every one a cluster IP with 10 backends, mapped
	// whether its rules carry comments or not.
	n := 0
	for f, v := range obs.Frontends {
		if v.Service.Namespace != "bulk" {
			continue
		}
		n++
		if f.Kind != model.ClusterIP || v.Action != model.Forward || len(v.Backends) != 10 {
			t.Errorf("bulk %s: %s %s with %d backends", f, f.Kind, v.Action, len(v.Backends))
		}
	}
	if n != 110 {
		t.Errorf("bulk frontends: %d, want 110", n)
	}
}

// The stale dump was taken with kube-proxy frozen: its rules are those of the
// converged state (the drift is in the cluster objects, not the rules).
func TestParseIPTablesStaleEqualsConverged(t *testing.T) {
	a, err := Parse(v4(t, "worker-a.iptables-save"), model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(v4(t, "stale.worker-a.iptables-save"), model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("stale and converged worker-a dumps parse differently")
	}
	cart := model.NewFrontend(netip.MustParseAddr("10.97.233.167"), 9090, model.TCP, model.ClusterIP)
	if !b.Frontends[cart].HasBackend(netip.MustParseAddrPort("10.214.1.41:50051")) {
		t.Error("stale dump must still DNAT shop/cart:grpc to 10.214.1.41:50051")
	}
	pay := model.NewFrontend(netip.MustParseAddr("10.97.230.30"), 443, model.TCP, model.ClusterIP)
	if b.Frontends[pay].Action != model.Reject {
		t.Error("stale dump must still reject shop/payments")
	}
}

var restoreInputWant = map[string]want{
	"cluster_ip 10.96.10.10:80/TCP":      {"demo/web:http/TCP", "forward 10.244.1.10:8080 10.244.2.10:8080"},
	"node_port *:30080/TCP IPv4":         {"demo/web:http/TCP", "forward 10.244.1.10:8080 10.244.2.10:8080"},
	"cluster_ip 10.96.10.11:9090/TCP":    {"demo/sticky:grpc/TCP", "forward 10.244.1.11:50051 10.244.2.11:50051"},
	"cluster_ip 10.96.10.12:443/TCP":     {"demo/empty:https/TCP", "reject"},
	"external_ip 203.0.113.12:443/TCP":   {"demo/empty:https/TCP", "reject"},
	"node_port *:30443/TCP IPv4":         {"demo/empty:https/TCP", "reject"},
	"cluster_ip 10.96.10.13:80/TCP":      {"demo/local-lb:web/TCP", "forward 10.244.2.13:8080"},
	"load_balancer 198.51.100.13:80/TCP": {"demo/local-lb:web/TCP", "drop"},
	"node_port *:30013/TCP IPv4":         {"demo/local-lb:web/TCP", "drop"},
	"cluster_ip 10.96.10.14:80/TCP":      {"demo/fw:web/TCP", "forward 10.244.1.14:8080"},
	"load_balancer 198.51.100.14:80/TCP": {"demo/fw:web/TCP", "forward 10.244.1.14:8080"},
	"cluster_ip 10.96.10.15:53/UDP":      {"demo/dns/UDP", "forward 10.244.1.15:53"},
	"cluster_ip 10.96.10.16:9100/TCP":    {"demo/itp-local:metrics/TCP", "drop"},
	"cluster_ip 10.96.10.17:3868/SCTP":   {"demo/sctp:diameter/SCTP", "forward 10.244.1.17:3868"},
}

func TestParseIPTablesRestoreInput(t *testing.T) {
	for _, name := range []string{"restore-input.iptables", "restore-input.roundtrip.iptables-save"} {
		t.Run(name, func(t *testing.T) {
			// 203.0.113.12 only has a filter rule: the caller says it is an external IP.
			ext := model.NewFrontend(netip.MustParseAddr("203.0.113.12"), 443, model.TCP, model.ExternalIP)
			opts := model.Hints{Frontends: map[model.Frontend]model.ServicePort{ext: {ServiceName: model.ServiceName{Namespace: "demo", Name: "empty"}, Port: "https", Protocol: model.TCP}}}
			obs, err := Parse(v4(t, name), opts)
			if err != nil {
				t.Fatal(err)
			}
			assertFrontends(t, obs, nil, restoreInputWant)
			if len(obs.Warnings) != 0 {
				t.Errorf("unexpected warnings: %q", obs.Warnings)
			}
		})
	}
}

func TestParseIPTablesDualStack(t *testing.T) {
	obs, err := Parse(Dumps{IPv4: readTestdata(t, "dualstack.v4.iptables-save"), IPv6: readTestdata(t, "dualstack.v6.iptables-save")}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	assertFrontends(t, obs, nil, map[string]want{
		"cluster_ip 10.96.10.10:80/TCP":       {"demo/web:http/TCP", "forward 10.244.1.10:8080"},
		"node_port *:30080/TCP IPv4":          {"demo/web:http/TCP", "forward 10.244.1.10:8080"},
		"cluster_ip [fd00:10:96::10]:80/TCP":  {"demo/web:http/TCP", "forward [fd00:10:244:1::10]:8080 [fd00:10:244:2::10]:8080"},
		"node_port *:30080/TCP IPv6":          {"demo/web:http/TCP", "forward [fd00:10:244:1::10]:8080 [fd00:10:244:2::10]:8080"},
		"cluster_ip [fd00:10:96::12]:443/TCP": {"demo/v6empty:https/TCP", "reject"},
	})
}

func TestParseIPTablesLargeCluster(t *testing.T) {
	obs, err := Parse(v4(t, "large-cluster.iptables-save"), largeClusterOptions())
	if err != nil {
		t.Fatal(err)
	}
	assertFrontends(t, obs, nil, map[string]want{
		"cluster_ip 10.96.20.1:80/TCP":       {"big/a:http/TCP", "forward 10.244.1.1:8080 10.244.1.2:8080 10.244.2.3:8080"},
		"cluster_ip 10.96.20.2:53/UDP":       {"big/b/UDP", "forward 10.244.1.4:53"},
		"cluster_ip 10.96.20.3:443/TCP":      {"big/lb:web/TCP", "forward 10.244.2.5:8443"},
		"load_balancer 198.51.100.3:443/TCP": {"big/lb:web/TCP", "forward 10.244.2.5:8443"},
		"node_port *:30003/TCP IPv4":         {"big/lb:web/TCP", "forward 10.244.2.5:8443"},
		"cluster_ip 10.96.20.4:80/TCP":       {"//", "forward 10.244.1.6:80"},
		"cluster_ip 10.96.20.5:80/TCP":       {"big/ext:http/TCP", "forward 10.244.1.7:80"},
		"external_ip 203.0.113.5:80/TCP":     {"big/ext:http/TCP", "forward 10.244.1.7:80"},
		"cluster_ip 10.96.20.6:80/TCP":       {"big/none:http/TCP", "reject"},
	})
	unknown := obs.Frontends[model.NewFrontend(netip.MustParseAddr("10.96.20.4"), 80, model.TCP, model.ClusterIP)]
	if !strings.Contains(strings.Join(unknown.Evidence, "\n"), "KUBE-SVC-3ADCBR4X4W3BBSAK") {
		t.Errorf("unresolved service must keep its chain name as evidence: %q", unknown.Evidence)
	}
	if !containsWarning(obs.Warnings, "KUBE-SVC-3ADCBR4X4W3BBSAK") || !containsWarning(obs.Warnings, "203.0.113.5") {
		t.Errorf("warnings must name the unresolved chain and the guessed external IP: %q", obs.Warnings)
	}
}

func containsWarning(ws []string, sub string) bool {
	for _, w := range ws {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

func TestParseIPTablesUnreachableChainsIgnored(t *testing.T) {
	obs, err := Parse(v4(t, "stale-chains.iptables-save"), model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	assertFrontends(t, obs, nil, map[string]want{
		"cluster_ip 10.96.10.10:80/TCP": {"demo/web:http/TCP", "forward 10.244.1.10:8080"},
	})
	for _, e := range obs.Frontends[model.NewFrontend(netip.MustParseAddr("10.96.10.10"), 80, model.TCP, model.ClusterIP)].Evidence {
		if strings.Contains(e, "S43XANNWXD6645P5") || strings.Contains(e, "gone") {
			t.Errorf("evidence from an unreachable chain: %s", e)
		}
	}
}

// Older kube-proxy versions wrote masquerade jumps into KUBE-SERVICES and
// KUBE-NODEPORTS ahead of the service jump, and node ports straight to
// KUBE-SVC; and a KUBE-SERVICES -> KUBE-NODEPORTS rule may name node IPs.
func TestParseIPTablesOlderLayouts(t *testing.T) {
	dump := `*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-XRY76EGRC3BSCIIJ - [0:0]
:KUBE-SEP-SI62D7XAGVO2CP3X - [0:0]
-A KUBE-SERVICES ! -s 10.244.0.0/16 -d 10.96.10.10/32 -p tcp -m comment --comment "demo/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -d 10.96.10.10/32 -p tcp -m comment --comment "demo/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-XRY76EGRC3BSCIIJ
-A KUBE-SERVICES -d 192.168.1.5/32 -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -j KUBE-NODEPORTS
-A KUBE-NODEPORTS -p tcp -m comment --comment "demo/web:http" -m tcp --dport 30080 -j KUBE-MARK-MASQ
-A KUBE-NODEPORTS -p tcp -m comment --comment "demo/web:http" -m tcp --dport 30080 -j KUBE-SVC-XRY76EGRC3BSCIIJ
-A KUBE-SVC-XRY76EGRC3BSCIIJ -m comment --comment "demo/web:http" -j KUBE-SEP-SI62D7XAGVO2CP3X
-A KUBE-SEP-SI62D7XAGVO2CP3X -s 10.244.1.10/32 -m comment --comment "demo/web:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-SI62D7XAGVO2CP3X -p tcp -m comment --comment "demo/web:http" -m tcp -j DNAT --to-destination 10.244.1.10:8080
COMMIT
*filter
COMMIT
`
	obs, err := Parse(Dumps{IPv4: []byte(dump)}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	assertFrontends(t, obs, nil, map[string]want{
		"cluster_ip 10.96.10.10:80/TCP": {"demo/web:http/TCP", "forward 10.244.1.10:8080"},
		"node_port *:30080/TCP IPv4":    {"demo/web:http/TCP", "forward 10.244.1.10:8080"},
	})
	if len(obs.Warnings) != 0 {
		t.Errorf("warnings: %q", obs.Warnings)
	}
}

// A frontend whose chains DNAT nowhere (an emptied KUBE-SVC chain) is kept
// as forward-to-nothing with a warning; one DNATed and also rejected by a
// leftover filter rule forwards (the filter rule never sees it).
func TestParseIPTablesEmptyAndShadowed(t *testing.T) {
	dump := `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-XRY76EGRC3BSCIIJ - [0:0]
:KUBE-SVC-7Y4NXW7GXZFPLLZT - [0:0]
:KUBE-SEP-LSJ6Y5ULBPIPVDZP - [0:0]
-A KUBE-SERVICES -d 10.96.10.10/32 -p tcp -m comment --comment "demo/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-XRY76EGRC3BSCIIJ
-A KUBE-SERVICES -d 10.96.10.11/32 -p tcp -m comment --comment "demo/sticky:grpc cluster IP" -m tcp --dport 9090 -j KUBE-SVC-7Y4NXW7GXZFPLLZT
-A KUBE-SVC-7Y4NXW7GXZFPLLZT -j KUBE-SEP-LSJ6Y5ULBPIPVDZP
-A KUBE-SEP-LSJ6Y5ULBPIPVDZP -p tcp -j DNAT --to-destination 10.244.1.11:50051
COMMIT
*filter
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -d 10.96.10.11/32 -p tcp -m comment --comment "demo/sticky:grpc has no endpoints" -m tcp --dport 9090 -j REJECT
COMMIT
`
	obs, err := Parse(Dumps{IPv4: []byte(dump)}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	assertFrontends(t, obs, nil, map[string]want{
		"cluster_ip 10.96.10.10:80/TCP":   {"demo/web:http/TCP", "forward"},
		"cluster_ip 10.96.10.11:9090/TCP": {"demo/sticky:grpc/TCP", "forward 10.244.1.11:50051"},
	})
	if !containsWarning(obs.Warnings, "10.96.10.10:80 is captured but its chains DNAT to no endpoint") ||
		!containsWarning(obs.Warnings, "10.96.10.11:9090 is DNATed and also has a filter reject rule") {
		t.Errorf("warnings: %q", obs.Warnings)
	}
}
