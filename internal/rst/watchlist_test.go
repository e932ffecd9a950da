package rst

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/deletions"
	"github.com/netdrift/netdrift/internal/model"
)

var (
	t0       = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	webIP4   = netip.MustParseAddr("10.244.1.13")
	webIP6   = netip.MustParseAddr("fd00::13")
	otherIP4 = netip.MustParseAddr("10.244.1.14")
)

// webPod is a delivery of shop/web-1 at at, recorded first into the
// registry r as the agent records it (deletion zero: not being deleted).
func webPod(r *deletions.Registry, at time.Time, deletion time.Time, deleted bool) PodChange {
	c := PodChange{Name: "shop/web-1", IPs: []netip.Addr{webIP4, webIP6}, Deleted: deleted, At: at}
	r.Record(c.Name, c.IPs, deletion, at)
	return c
}

// testDeletions is the registry a test pipeline reads.
func testDeletions(p *Pipeline) *deletions.Registry { return p.cfg.Deletions.(*deletions.Registry) }

// TestWatchListFromEvents: a pod's addresses are watched from its first
// delivery until the window after it is gone; the first deletion request is
// kept and written to the probe once.
func TestWatchListFromEvents(t *testing.T) {
	r := deletions.New(0)
	l := newWatchList(time.Minute, r)
	if set, stop := l.apply(webPod(r, t0, time.Time{}, false)); !reflect.DeepEqual(set, []netip.Addr{webIP4, webIP6}) || stop != nil {
		t.Fatalf("a live pod: set %v stop %v", set, stop)
	}
	if set, _ := l.apply(webPod(r, t0, time.Time{}, false)); set != nil {
		t.Errorf("an unchanged pod set %v again", set)
	}
	set, _ := l.apply(webPod(r, t0.Add(time.Second), t0, false))
	if !reflect.DeepEqual(set, []netip.Addr{webIP4, webIP6}) {
		t.Fatalf("deletion request: set %v", set)
	}
	if set, _ := l.apply(webPod(r, t0.Add(2*time.Second), t0.Add(2*time.Second), false)); set != nil {
		t.Errorf("second deletion request set %v again", set)
	}
	if got := l.table().Addrs[webIP4]; got != (Target{Namespace: "shop", Pod: "web-1", Deleted: t0}) {
		t.Errorf("target %+v: want the first deletion request kept", got)
	}
	gone := t0.Add(10 * time.Second)
	if set, _ := l.apply(webPod(r, gone, t0, true)); len(set) != 2 {
		t.Errorf("removal set %v, want both addresses (their removal time)", set)
	}
	if got := l.nextExpiry(); !got.Equal(gone.Add(time.Minute)) {
		t.Errorf("next expiry %v, want %v", got, gone.Add(time.Minute))
	}
	if out := l.expire(gone.Add(time.Minute - time.Nanosecond)); out != nil {
		t.Errorf("expired before the window: %v", out)
	}
	out := l.expire(gone.Add(time.Minute))
	if len(out) != 2 || out[webIP4].Pod != "web-1" || len(l.addrs()) != 0 || !l.nextExpiry().IsZero() {
		t.Errorf("expired %v, left %v", out, l.addrs())
	}
}

// TestWatchListHostNetwork: a host-network pod's addresses (the node's) are
// never watched.
func TestWatchListHostNetwork(t *testing.T) {
	r := deletions.New(0)
	l := newWatchList(time.Minute, r)
	if set, _ := l.apply(PodChange{Name: "kube-system/kube-proxy-x", IPs: []netip.Addr{webIP4}, HostNetwork: true, At: t0}); set != nil {
		t.Errorf("host network pod watched: %v", set)
	}
}

// TestWatchListForceDelete: a pod deleted without a terminating phase
// (grace 0) is watched from its delete for the window.
func TestWatchListForceDelete(t *testing.T) {
	r := deletions.New(0)
	l := newWatchList(time.Minute, r)
	r.Record("shop/web-1", []netip.Addr{webIP4}, t0, t0)
	set, _ := l.apply(PodChange{Name: "shop/web-1", IPs: []netip.Addr{webIP4}, Deleted: true, At: t0})
	if !reflect.DeepEqual(set, []netip.Addr{webIP4}) || !l.nextExpiry().Equal(t0.Add(time.Minute)) {
		t.Errorf("set %v, expiry %v", set, l.nextExpiry())
	}
}

// TestWatchListAddressReused: an address another pod now has is handed over.
func TestWatchListAddressReused(t *testing.T) {
	r := deletions.New(0)
	l := newWatchList(time.Minute, r)
	l.apply(webPod(r, t0, t0, true))
	set, stop := l.apply(PodChange{Name: "blog/b-1", IPs: []netip.Addr{webIP4}, At: t0.Add(time.Second)})
	if !reflect.DeepEqual(set, []netip.Addr{webIP4}) || len(stop) != 1 || stop[webIP4].Pod != "web-1" {
		t.Fatalf("reuse: set %v stop %v", set, stop)
	}
	if got := l.table().Addrs[webIP4]; got.Namespace != "blog" || got.Pod != "b-1" {
		t.Errorf("reused address attributed to %+v", got)
	}
}

// TestServicesOf: an address is an endpoint of a service of its own namespace.
func TestServicesOf(t *testing.T) {
	ep := func(a netip.Addr) model.Endpoint { return model.Endpoint{Addr: netip.AddrPortFrom(a, 8080)} }
	desired := map[model.Frontend]model.Verdict{
		model.NewFrontend(netip.MustParseAddr("10.96.0.5"), 80, model.TCP, model.ClusterIP): {
			Service: model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "web"}, Port: "http"}, Endpoints: []model.Endpoint{ep(webIP4), ep(otherIP4)}},
		model.NewFrontend(netip.MustParseAddr("fd00::96:5"), 80, model.TCP, model.ClusterIP): {
			Service: model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "web"}, Port: "http"}, Endpoints: []model.Endpoint{ep(webIP6)}},
	}
	got := DesiredServices(func() map[model.Frontend]model.Verdict { return desired }).ServicesOf(
		map[netip.Addr]string{webIP4: "shop", webIP6: "shop", otherIP4: "blog"})
	web := model.ServiceName{Namespace: "shop", Name: "web"}
	want := map[netip.Addr]model.ServiceName{webIP4: web, webIP6: web} // otherIP4: another namespace's pod
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// indexOf is an EndpointIndex over a fixed list (the agent's in the product).
type indexOf map[netip.Addr][]model.ServiceEndpoint

func (x indexOf) EndpointsOf(ips []netip.Addr) map[netip.Addr][]model.ServiceEndpoint {
	out := map[netip.Addr][]model.ServiceEndpoint{}
	for _, ip := range ips {
		if eps, ok := x[ip]; ok {
			out[ip] = eps
		}
	}
	return out
}

// TestIndexedServices: looked up in an index, an address's endpoints are
// those of services of its own namespace, one per target port (the first
// service by name), ready when one of them is ready and not terminating.
func TestIndexedServices(t *testing.T) {
	svc := func(name string) model.ServicePort {
		return model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: name}, Protocol: model.TCP}
	}
	idx := indexOf{
		webIP4: {
			{Service: svc("web"), Addr: netip.AddrPortFrom(webIP4, 8080), Ready: true, Terminating: true},
			{Service: svc("api"), Addr: netip.AddrPortFrom(webIP4, 8080), Ready: false},
			{Service: svc("web"), Addr: netip.AddrPortFrom(webIP4, 9090), Ready: true},
		},
		otherIP4: {{Service: svc("web"), Addr: netip.AddrPortFrom(otherIP4, 8080), Ready: true}},
	}
	got := IndexedServices(func() EndpointIndex { return idx }).EndpointsOf(
		map[netip.Addr]string{webIP4: "shop", otherIP4: "blog", webIP6: "shop"})
	want := map[netip.Addr]map[uint16]EndpointRef{webIP4: {8080: {Service: svc("api").ServiceName}, 9090: {Service: svc("web").ServiceName, Ready: true}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
