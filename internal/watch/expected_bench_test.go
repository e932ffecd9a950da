package watch

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// benchState: services services with perSvc endpoints each over nodes nodes,
// one slice per 100 endpoints, a quarter of the services with iTP Local and
// a tenth of the endpoints terminating.
func benchState(services, perSvc, nodes int) *ClusterState {
	cs := &ClusterState{}
	for n := 0; n < nodes; n++ {
		cs.Nodes = append(cs.Nodes, node(fmt.Sprintf("node-%d", n), fmt.Sprintf("z%d", n%3)))
	}
	for s := 0; s < services; s++ {
		name := fmt.Sprintf("s%04d", s)
		opts := []svcOpt{clusterIPs(fmt.Sprintf("10.96.%d.%d", s/250, s%250+1)), nodePort(int32(30000 + s))}
		if s%4 == 0 {
			opts = append(opts, iTPLocal)
		}
		cs.Services = append(cs.Services, svc(name, opts...))
		var eps []discoveryv1.Endpoint
		for e := 0; e < perSvc; e++ {
			var o []epOpt
			if e%10 == 9 {
				o = append(o, terminatingServing)
			}
			eps = append(eps, ep(fmt.Sprintf("10.%d.%d.%d", 100+s/250, s%250, e%250+1)+"", fmt.Sprintf("node-%d", e%nodes), o...))
			if len(eps) == 100 || e == perSvc-1 {
				cs.EndpointSlices = append(cs.EndpointSlices, slice(fmt.Sprintf("%s-%d", name, e/100), name, eps...))
				eps = nil
			}
		}
	}
	return cs
}

// BenchmarkExpected: 1,000 services / 100,000 endpoints, 50 nodes.
func BenchmarkExpected(b *testing.B) {
	cs := benchState(1000, 100, 50)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := Expected("node-7", cs)
		if len(d.Frontends) != 2000 {
			b.Fatalf("frontends = %d", len(d.Frontends))
		}
	}
}

// BenchmarkExpectedService: one service of 100 endpoints (the live agent's
// per-change cost).
func BenchmarkExpectedService(b *testing.B) {
	cs := benchState(1, 100, 50)
	var n *corev1.Node = cs.Nodes[7]
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if m := ExpectedService(n, n.Name, cs.Services[0], cs.EndpointSlices); len(m) != 2 {
			b.Fatalf("frontends = %d", len(m))
		}
	}
}
