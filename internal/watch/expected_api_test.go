package watch

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
)

func loadFixture(t testing.TB) *ClusterState {
	t.Helper()
	return loadListFile(t, fixture.Path(t, "cluster.json"))
}

// Output does not depend on input order or on map iteration.
func TestExpectedDeterministic(t *testing.T) {
	cs := loadFixture(t)
	want := Expected("worker-a", cs)
	rev := &ClusterState{
		Services:       slices.Clone(cs.Services),
		EndpointSlices: slices.Clone(cs.EndpointSlices),
		Nodes:          slices.Clone(cs.Nodes),
	}
	slices.Reverse(rev.Services)
	slices.Reverse(rev.EndpointSlices)
	slices.Reverse(rev.Nodes)
	for i := 0; i < 5; i++ {
		if got := Expected("worker-a", rev); !reflect.DeepEqual(got, want) {
			t.Fatal("Expected differs between runs or input orders")
		}
	}
}

// ExpectedService, called per service with every slice, agrees with Expected.
func TestExpectedServiceMatchesExpected(t *testing.T) {
	cs := loadFixture(t)
	d := Expected("worker-b", cs)
	nodeB := findNode(cs.Nodes, "worker-b")
	n := 0
	for _, s := range cs.Services {
		for fe, v := range ExpectedService(nodeB, "worker-b", s, cs.EndpointSlices) {
			n++
			if !reflect.DeepEqual(d.Frontends[fe], v) {
				t.Errorf("%s %s: ExpectedService and Expected differ", s.Name, fe)
			}
		}
	}
	if n != len(d.Frontends) {
		t.Errorf("ExpectedService gave %d frontends, Expected %d", n, len(d.Frontends))
	}
	if m := ExpectedService(nil, "x", nil, nil); len(m) != 0 {
		t.Errorf("nil service: %v", m)
	}
	if d := Expected("x", nil); len(d.Frontends) != 0 || d.Node != "x" {
		t.Errorf("nil state: %+v", d)
	}
}

// Without a Node object the zone is unknown, so zone hints are ignored.
func TestExpectedServiceNilNodeIgnoresZoneHints(t *testing.T) {
	s := svc("s")
	sl := []*discoveryv1.EndpointSlice{slice("s-1", "s",
		ep("10.1.0.1", "node-a", zoneHints("za")), ep("10.1.0.2", "node-b", zoneHints("zb")))}
	m := ExpectedService(nil, "node-a", s, sl)
	withNode := ExpectedService(node("node-a", "za"), "node-a", s, sl)
	fe := model.NewFrontend(mustAddr("10.96.0.1"), 80, model.TCP, model.ClusterIP)
	if got := len(m[fe].Backends); got != 2 {
		t.Errorf("nil node: %d backends, want 2", got)
	}
	if got := len(withNode[fe].Backends); got != 1 {
		t.Errorf("node in za: %d backends, want 1", got)
	}
}

// Evidence says why a verdict is what it is.
func TestExpectedEvidence(t *testing.T) {
	d := Expected("worker-a", loadFixture(t))
	cases := []struct {
		svc  string
		kind model.FrontendKind
		want []string
	}{
		{"shop/payments:https", model.ClusterIP, []string{"no ready or serving-terminating endpoints", "reject"}},
		{"shop/cache:memcache", model.ClusterIP, []string{"no ready endpoints anywhere", "2 serving-terminating"}},
		{"shop/search:http", model.ClusterIP, []string{"internalTrafficPolicy Local", "1 ready endpoint(s) on node worker-a"}},
		{"shop/frontend:web", model.LoadBalancer, []string{"externalTrafficPolicy Local", "outside the cluster", "load-balancer IP 192.0.2.100:80/TCP", "loadBalancerSourceRanges 192.0.2.0/24"}},
		{"shop/cart:grpc", model.ClusterIP, []string{"policy Cluster: 2 ready endpoint(s)"}},
	}
	for _, c := range cases {
		v, ok := findVerdict(d, c.svc, c.kind)
		if !ok {
			t.Errorf("%s: missing", c.svc)
			continue
		}
		ev := strings.Join(v.Evidence, "\n")
		for _, w := range c.want {
			if !strings.Contains(ev, w) {
				t.Errorf("%s evidence %q lacks %q", c.svc, ev, w)
			}
		}
	}
}

// The frontends of one service port share their backends and endpoints
// (read-only: model.Desired), clipped so that an append to one verdict's
// slice never shows in another's.
func TestExpectedVerdictsShareClipped(t *testing.T) {
	s := svc("s", nodePort(30080))
	m := ExpectedService(nil, "node-a", s, []*discoveryv1.EndpointSlice{slice("s-1", "s",
		ep("10.1.0.1", "node-a"), ep("10.1.0.2", "node-b"))})
	var vs []model.Verdict
	for _, fe := range model.SortedFrontends(m) {
		vs = append(vs, m[fe])
	}
	if len(vs) < 2 || len(vs[0].Endpoints) != 2 || len(vs[0].Backends) != 2 {
		t.Fatalf("want two frontends with two endpoints each, got %+v", vs)
	}
	if &vs[0].Endpoints[0] != &vs[1].Endpoints[0] || &vs[0].Backends[0] != &vs[1].Backends[0] {
		t.Error("the frontends of one service port do not share their endpoints and backends")
	}
	if cap(vs[0].Endpoints) != len(vs[0].Endpoints) || cap(vs[0].Backends) != len(vs[0].Backends) {
		t.Fatal("shared slices are not clipped")
	}
	grown := append(vs[0].Backends, vs[0].Backends[0])
	if &grown[0] == &vs[1].Backends[0] {
		t.Error("an append to one verdict's backends wrote into the shared array")
	}
}
