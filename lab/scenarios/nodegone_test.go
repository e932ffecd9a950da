package scenarios

import (
	"context"
	"strings"
	"testing"
	"time"
)

// testNodeGone: node-3 is deleted (its namespace and Node object) while the
// control plane is slow: kube-controller-manager is frozen. Its EndpointSlice
// keeps listing node-3's endpoint: the EndpointSlice controller does not
// resync Services when a Node goes; the endpoint goes when the pod garbage
// collector deletes the orphaned pod (after its 40 s quarantine, checked
// every 20 s) or another change of the Service triggers a resync. The
// remaining nodes report endpoint_on_missing_node for that endpoint and
// stale_route for node-3's pod CIDR; once the controller manager runs again
// the endpoint goes (finding cleared, kube-proxy stops sending to it, no
// stale_backend); stale_route stays until the routes are removed.
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
	if err := l.FreezeControllerManager(); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := l.ThawControllerManager(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(thaw)
	if err := l.DeleteNode(ctx, gone); err != nil {
		t.Fatal(err)
	}
	agents := agentsOf(t, l) // the remaining nodes
	if len(agents) != 2 {
		t.Fatalf("%d nodes left, want 2", len(agents))
	}
	for _, a := range agents {
		took := eventually(t, 60*time.Second, 500*time.Millisecond, a.Node+": endpoint_on_missing_node and stale_route", func() (bool, string) {
			d := drift(ctx, a)
			ep := len(missingNodeFindings(d, remote.IP, gone)) > 0
			return ep && hasStaleRoute(d, podCIDR), "findings " + kinds(d.Findings)
		})
		d := drift(ctx, a)
		t.Logf("%s: %s after the deletion: %s", a.Node, took.Round(time.Millisecond),
			missingNodeFindings(d, remote.IP, gone)[0].Detail)
	}
	thaw()
	for _, a := range agents {
		took := eventually(t, 120*time.Second, 500*time.Millisecond, a.Node+": endpoint_on_missing_node clears", func() (bool, string) {
			d := drift(ctx, a)
			if fs := findingsOf(d, "stale_backend", "default/gone"); len(fs) > 0 {
				return false, "stale_backend " + fs[0].Backend + ": " + fs[0].Detail
			}
			return len(missingNodeFindings(d, remote.IP, gone)) == 0 && hasStaleRoute(d, podCIDR),
				"findings " + kinds(d.Findings)
		})
		t.Logf("%s: endpoint_on_missing_node cleared %s after the controller resumed; stale_route (%s) remains", a.Node,
			took.Round(time.Millisecond), podCIDR)
	}
	if err := l.RemoveNodeRoutes(gone); err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		took := eventually(t, 40*time.Second, 500*time.Millisecond, a.Node+": stale_route clears", func() (bool, string) {
			fs := findingsOf(drift(ctx, a), "stale_route", "")
			return len(fs) == 0, kinds(fs)
		})
		t.Logf("%s: stale_route cleared %s after the routes were removed", a.Node, took.Round(time.Millisecond))
	}
}

func drift(ctx context.Context, a *Agent) Drift {
	var d Drift
	if err := a.Get(ctx, "/v1/drift", &d); err != nil {
		d.Findings = []Finding{{Kind: "error", Detail: err.Error()}}
	}
	return d
}

func missingNodeFindings(d Drift, ip, node string) []Finding {
	var out []Finding
	for _, f := range findingsOf(d, "endpoint_on_missing_node", "default/gone") {
		if strings.Contains(f.Detail, ip) && strings.Contains(f.Detail, node) {
			out = append(out, f)
		}
	}
	return out
}

func hasStaleRoute(d Drift, podCIDR string) bool {
	for _, f := range findingsOf(d, "stale_route", "") {
		if strings.Contains(f.Subject, podCIDR) {
			return true
		}
	}
	return false
}
