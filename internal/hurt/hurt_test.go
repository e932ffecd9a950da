package hurt

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
)

// TestCountsNewFlowsToStaleBackends: a NEW flow whose DNAT destination is a
// stale_backend finding's backend for its frontend counts for the finding
// and its service; flows to live backends, other frontends or not DNATed
// do not; a finding that goes away stops counting, and its own count is
// dropped while its service's counter keeps it.
func TestCountsNewFlowsToStaleBackends(t *testing.T) {
	fe := model.NewFrontend(netip.MustParseAddr("10.96.0.5"), 80, model.TCP, model.ClusterIP)
	stale := netip.MustParseAddrPort("10.244.1.13:8080")
	f := drift.Tracked{Finding: model.Finding{Kind: model.StaleBackend, Frontend: &fe, Backend: stale,
		Service: model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "web"}, Port: "http", Protocol: model.TCP}}}
	found := true
	now := time.Unix(0, 0)
	c := New(func() ([]drift.Tracked, []drift.Tracked) {
		if !found {
			return nil, nil
		}
		return []drift.Tracked{f}, nil
	}, func() time.Time { return now }, time.Second, 100)
	flow := func(dst, backend string) model.Flow {
		return model.Flow{Protocol: model.TCP,
			Orig:  model.Tuple{Src: netip.MustParseAddrPort("10.244.2.7:40000"), Dst: netip.MustParseAddrPort(dst)},
			Reply: model.Tuple{Src: netip.MustParseAddrPort(backend), Dst: netip.MustParseAddrPort("10.244.2.7:40000")}}
	}
	for range 3 {
		c.Observe(flow("10.96.0.5:80", "10.244.1.13:8080"))
	}
	c.Observe(flow("10.96.0.5:80", "10.244.1.14:8080"))     // a live backend
	c.Observe(flow("10.96.0.6:80", "10.244.1.13:8080"))     // another frontend
	c.Observe(flow("10.244.1.13:8080", "10.244.1.13:8080")) // direct, not DNATed
	if n, ok := c.Connections(f.Key()); !ok || n != 3 {
		t.Errorf("finding connections %d %v, want 3", n, ok)
	}
	found = false
	now = now.Add(2 * time.Second)
	c.Observe(flow("10.96.0.5:80", "10.244.1.13:8080"))
	if n, ok := c.Connections(f.Key()); ok {
		t.Errorf("after the finding went: still counted (%d)", n)
	}
	want := `
# HELP netdrift_stale_backend_connections_total New connections (conntrack NEW) this node sent to the backend of a stale_backend finding, by service (capped; the rest under service="_other").
# TYPE netdrift_stale_backend_connections_total counter
netdrift_stale_backend_connections_total{namespace="shop",service="web"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestCountsConcurrently: flows observed from many goroutines (conntrack
// events and the refresh race) are each counted once, per protocol's
// finding; a UDP flow to a live backend is not.
func TestCountsConcurrently(t *testing.T) {
	fe := model.NewFrontend(netip.MustParseAddr("10.96.0.10"), 53, model.UDP, model.ClusterIP)
	f := drift.Tracked{Finding: model.Finding{Kind: model.StaleBackend, Frontend: &fe,
		Backend: netip.MustParseAddrPort("10.244.3.3:53"),
		Service: model.ServicePort{ServiceName: model.ServiceName{Namespace: "kube-system", Name: "kube-dns"}, Port: "dns", Protocol: model.UDP}}}
	c := New(func() ([]drift.Tracked, []drift.Tracked) { return []drift.Tracked{f}, nil }, nil, time.Nanosecond, 10)
	flow := func(backend string) model.Flow {
		return model.Flow{Protocol: model.UDP,
			Orig:  model.Tuple{Src: netip.MustParseAddrPort("10.244.0.5:40002"), Dst: netip.MustParseAddrPort("10.96.0.10:53")},
			Reply: model.Tuple{Src: netip.MustParseAddrPort(backend), Dst: netip.MustParseAddrPort("10.244.0.5:40002")}}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Observe(flow("10.244.3.3:53"))
			c.Observe(flow("10.244.1.5:53")) // the live backend
		}()
	}
	wg.Wait()
	if n, ok := c.Connections(f.Key()); !ok || n != 8 {
		t.Errorf("connections %d %v, want 8", n, ok)
	}
}
