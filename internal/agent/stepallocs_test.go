package agent

import (
	"fmt"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/model"
)

// stepAllocs is the allocations of one step that reads the datapath, in a
// cluster of n services of two endpoints each; change: one service's
// endpoint moves before each step (kube-proxy programs it at once).
func stepAllocs(t *testing.T, n int, change bool) float64 {
	h := newHarnessWith(t, func(c *Config) { c.FullAuditInterval = time.Hour })
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		h.c.services["shop/"+name] = service(name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1))
		h.c.slices["shop/"+name] = []*discoveryv1.EndpointSlice{slice(name, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), fmt.Sprintf("10.2.%d.%d", i/250, i%250+1))}
	}
	slices := [2]*discoveryv1.EndpointSlice{slice("s0", "10.3.0.1"), slice("s0", "10.3.0.2")}
	h.kubeProxySyncs()
	h.a.Step(h.ctx)
	reads := h.src.n
	// kube-proxy's tables for s0 at either endpoint, made beforehand: the
	// fake's own cost is no part of the step's.
	var obs [2]model.Observed
	for i := range obs {
		h.c.slices["shop/s0"] = []*discoveryv1.EndpointSlice{slices[i]}
		obs[i] = h.desiredOf()
	}
	h.c.slices["shop/s0"] = []*discoveryv1.EndpointSlice{slices[1]}
	k := 0
	allocs := testing.AllocsPerRun(10, func() {
		if change {
			k++
			h.setSlice(slices[k%2], time.Time{})
			o := obs[k%2]
			o.Version = uint64(k)
			h.src.set(o, nil)
		}
		h.advance(11 * time.Second)
	})
	if h.src.n-reads < 10 {
		t.Fatalf("%d datapath reads over 11 steps of 11 s; want one a step", h.src.n-reads)
	}
	return allocs
}

// TestStepAllocsDoNotGrowWithCluster: a step that finds nothing changed
// copies nothing of the desired or observed state (no published copy, no
// index rebuilt): its allocations are the same at 50 and at 1,000 services.
func TestStepAllocsDoNotGrowWithCluster(t *testing.T) {
	small, large := stepAllocs(t, 50, false), stepAllocs(t, 1000, false)
	t.Logf("allocations per step: %.0f at 50 services, %.0f at 1000", small, large)
	if large > small+10 {
		t.Fatalf("a step without changes allocates %.0f times at 1000 services, %.0f at 50: something copies per step", large, small)
	}
}

// TestChangeStepAllocsDoNotGrowWithCluster: a step that applies one
// service's change costs that service (its desired state, merged state and
// endpoint index entries), not the cluster's.
func TestChangeStepAllocsDoNotGrowWithCluster(t *testing.T) {
	small, large := stepAllocs(t, 50, true), stepAllocs(t, 1000, true)
	t.Logf("allocations per step with one change: %.0f at 50 services, %.0f at 1000", small, large)
	if large > small*1.2+10 {
		t.Fatalf("a step with one change allocates %.0f times at 1000 services, %.0f at 50: something copies per step", large, small)
	}
}
