package agent

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/deletions"
	"github.com/netdrift/netdrift/internal/model"
)

// The tracker's desired state goes through the datapath's semantics
// (Options.Semantics) on the initial list, on every change and in the full
// audit: a full audit with the same semantics corrects nothing.
func TestTrackerAppliesSemantics(t *testing.T) {
	cart := model.ServiceName{Namespace: "shop", Name: "cart"}
	c := newFakeCluster()
	c.services[cart.String()] = service("cart", "10.96.0.5")
	c.slices[cart.String()] = []*discoveryv1.EndpointSlice{slice("cart", "10.244.1.2")}
	mark := func(v model.Verdict) model.Verdict {
		v.Evidence = append(append([]string(nil), v.Evidence...), "adjusted")
		return v
	}
	tr := newChangeTracker(deletions.New(0), mark)
	tr.sync(c, nil, node)
	check := func(when string) {
		t.Helper()
		n := 0
		for _, v := range tr.desired[cart] {
			n++
			if len(v.Evidence) == 0 || v.Evidence[len(v.Evidence)-1] != "adjusted" {
				t.Errorf("%s: verdict not adjusted: %v", when, v.Evidence)
			}
		}
		if n == 0 {
			t.Fatalf("%s: no desired frontends", when)
		}
	}
	check("initial list")
	c.slices[cart.String()] = []*discoveryv1.EndpointSlice{slice("cart", "10.244.1.2", "10.244.1.3")}
	tr.markDirty(cart, start, start)
	if _, changed := tr.sync(c, nil, node); !changed {
		t.Fatal("a new endpoint changed nothing")
	}
	check("change")
	if got := tr.resync(c, nil, node, start); got != 0 {
		t.Errorf("full audit corrected %d services", got)
	}
	check("full audit")
	if plain := newChangeTracker(deletions.New(0), nil); plain.semantics != nil {
		t.Error("nil semantics must keep kube-proxy's verdicts")
	}
}
