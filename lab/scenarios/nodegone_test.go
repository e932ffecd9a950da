package scenarios

import (
	"context"
	"strings"
	"testing"
	"time"
)

// testNodeGone: node-3 is deleted (its namespace and Node object). The
// remaining nodes report stale_route for their route to its pod CIDR until
// the routes are removed. endpoint_on_missing_node cannot arise here: the
// v1.37 EndpointSlice controller drops the endpoints of pods whose Node does
// not exist (endpointslice reconciler), so the check is that no remaining
// node is left with the gone node's backend (no stale_backend) and that, if
// the slice still listed it at some point, netdrift said so.
func testNodeGone(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	gone := "node-3"
	_, pods := service(t, l, "gone", []string{"node-1", gone}, 0)
	var remote podInfo
	for _, p := range pods {
		if p.Node == gone {
			remote = p
		}
	}
	var podCIDR string
	for _, n := range l.Nodes() {
		if n.Name == gone {
			podCIDR = n.PodCIDR
		}
	}
	if err := l.DeleteNode(ctx, gone); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	agents := agentsOf(t, l) // the remaining nodes
	if len(agents) != 2 {
		t.Fatalf("%d nodes left, want 2", len(agents))
	}
	for _, a := range agents {
		took := eventually(t, 60*time.Second, 500*time.Millisecond, a.Node+": stale_route, no stale_backend", func() (bool, string) {
			var d Drift
			if err := a.Get(ctx, "/v1/drift", &d); err != nil {
				return false, err.Error()
			}
			route := false
			for _, f := range findingsOf(d, "stale_route", "") {
				route = route || strings.Contains(f.Subject, podCIDR)
			}
			for _, f := range findingsOf(d, "endpoint_on_missing_node", "") {
				if strings.Contains(f.Subject+f.Detail+f.Backend, remote.IP) {
					t.Logf("%s: endpoint_on_missing_node: %s", a.Node, f.Detail)
				}
			}
			for _, f := range findingsOf(d, "stale_backend", "default/gone") {
				return false, "stale_backend " + f.Backend + ": " + f.Detail
			}
			return route, "findings " + kinds(d.Findings) + " pending " + kinds(d.Pending)
		})
		t.Logf("%s: stale_route (%s) reported %s after the deletion; %s's endpoint %s not programmed",
			a.Node, podCIDR, took.Round(time.Millisecond), gone, remote.IP)
	}
	_ = deleted
	if err := l.RemoveNodeRoutes(gone); err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		took := eventually(t, 40*time.Second, 500*time.Millisecond, a.Node+": stale_route clears", func() (bool, string) {
			var d Drift
			if err := a.Get(ctx, "/v1/drift", &d); err != nil {
				return false, err.Error()
			}
			fs := findingsOf(d, "stale_route", "")
			return len(fs) == 0, kinds(fs)
		})
		t.Logf("%s: stale_route cleared %s after the routes were removed", a.Node, took.Round(time.Millisecond))
	}
}
