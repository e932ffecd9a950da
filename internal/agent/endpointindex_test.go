package agent

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/model"
)

// TestEndpointsOfFollowsTheWatch: the agent's index answers which service
// port a pod address of this node backs, and follows slice changes: an
// endpoint removed from its slice is gone, one on another node is never
// listed, an unknown address has none.
func TestEndpointsOfFollowsTheWatch(t *testing.T) {
	h := newHarness(t)
	h.start()
	ip1, ip2 := netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.1.0.2")
	got := h.a.EndpointsOf([]netip.Addr{ip1, ip2, netip.MustParseAddr("10.9.9.9")})
	if len(got) != 2 || len(got[ip1]) != 1 {
		t.Fatalf("after the initial list: %v, want one endpoint each for 10.1.0.1 and 10.1.0.2", got)
	}
	if e := got[ip1][0]; e.Service.Namespace != "shop" || e.Service.Name != "web" || e.Addr.Port() != 8080 || !e.Ready {
		t.Fatalf("endpoint of 10.1.0.1: %+v", e)
	}
	s := slice("web", "10.1.0.1", "10.1.0.3")
	s.Endpoints[1].NodeName = ptr("node-2") // another node's pod: not this node's index
	h.setSlice(s, time.Time{})
	h.advance(time.Millisecond)
	got = h.a.EndpointsOf([]netip.Addr{ip1, ip2, netip.MustParseAddr("10.1.0.3")})
	if len(got) != 1 || len(got[ip1]) != 1 {
		t.Fatalf("after the slice change: %v, want 10.1.0.1 only", got)
	}
	h.setSlice(&discoveryv1.EndpointSlice{ObjectMeta: s.ObjectMeta, AddressType: s.AddressType, Ports: s.Ports}, time.Time{})
	h.advance(time.Millisecond)
	if got = h.a.EndpointsOf([]netip.Addr{ip1}); len(got) != 0 {
		t.Fatalf("after the slice emptied: %v, want none", got)
	}
}

// TestEndpointIndexRebuildAllocs: a rebuild (the initial list, at the
// agent's start-up memory peak) allocates the map once, sized for every
// endpoint, and one short slice per address: no garbage of a growing map.
func TestEndpointIndexRebuildAllocs(t *testing.T) {
	bySvc := map[model.ServiceName]map[model.Frontend]model.Verdict{}
	const n = 2000
	for i := range n {
		sp := model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: fmt.Sprintf("s%d", i)}, Port: "http"}
		fe := model.Frontend{IP: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Protocol: "TCP"}
		ep := model.Endpoint{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 8080), Ready: true}
		bySvc[sp.ServiceName] = map[model.Frontend]model.Verdict{fe: {Service: sp, Endpoints: []model.Endpoint{ep}}}
	}
	var x endpointIndex
	allocs := testing.AllocsPerRun(5, func() { x.rebuild(node, bySvc) })
	t.Logf("%.0f allocations for %d endpoints", allocs, n)
	if len(x.byAddr) != n {
		t.Fatalf("%d addresses indexed, want %d", len(x.byAddr), n)
	}
	if allocs > n+16 {
		t.Fatalf("a rebuild of %d endpoints allocates %.0f times; want one slice per address and the map at once", n, allocs)
	}
}
