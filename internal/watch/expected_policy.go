package watch

import (
	"fmt"
	"net/netip"

	"github.com/netdrift/netdrift/internal/model"
)

// Topology modes kube-proxy derives from endpoint hints.
const (
	topoNone     = ""
	topoSameZone = "PreferSameZone"
	topoSameNode = "PreferSameNode"
)

// Endpoint reasons, shown to explain a stale or missing backend.
const (
	reasonReady             = "ready"
	reasonFallback          = "serving-terminating fallback"
	reasonNotReady          = "not ready"
	reasonTermNotServing    = "terminating, not serving"
	reasonTermReadyExist    = "terminating (ready endpoints exist)"
	reasonTermLocalReady    = "terminating (local ready endpoints exist)"
	reasonNotLocal          = "not local (Local policy)"
	reasonTopoOtherZone     = "topology: hinted for another zone"
	reasonTopoOtherNode     = "topology: hinted for another node"
	reasonNoUsableEndpoints = "no ready or serving-terminating endpoints"
)

// selection is the backend set one policy yields.
type selection struct {
	action    model.Action
	backends  []netip.AddrPort
	endpoints []model.Endpoint
	evidence  []string
}

// hasUsable reports whether any endpoint anywhere is ready or
// serving-terminating. Without one kube-proxy rejects every frontend of the
// service port, whatever the traffic policy.
func hasUsable(eps []*endpoint) bool {
	for _, e := range eps {
		if e.usable && (e.Ready || e.servingTerminating()) {
			return true
		}
	}
	return false
}

// topologyMode returns the mode kube-proxy v1.37 uses (PreferSameTrafficDistribution
// is GA there): PreferSameNode if every ready endpoint has a node hint and one
// names this node; else PreferSameZone if every ready endpoint has a zone hint
// and one names this node's zone; else none. The string says why.
func topologyMode(eps []*endpoint, nodeName, zone string) (string, string) {
	ready, allNode, forNode, allZone, forZone := 0, true, false, true, false
	for _, e := range eps {
		if !e.usable || !e.Ready {
			continue
		}
		ready++
		allNode = allNode && len(e.nodeHints) > 0
		forNode = forNode || contains(e.nodeHints, nodeName)
		allZone = allZone && len(e.zoneHints) > 0
		forZone = forZone || contains(e.zoneHints, zone)
	}
	switch {
	case ready == 0:
		return topoNone, ""
	case allNode && forNode:
		return topoSameNode, "topology PreferSameNode: every ready endpoint has a node hint, some for node " + nodeName
	case allZone && forZone:
		return topoSameZone, "topology PreferSameZone: every ready endpoint has a zone hint, some for zone " + zone
	case allZone && zone == "":
		return topoNone, "topology hints ignored: node has no " + labelZone + " label"
	case allZone:
		return topoNone, "topology hints ignored: no endpoint hinted for zone " + zone
	}
	return topoNone, ""
}

func topologyAllows(e *endpoint, mode, nodeName, zone string) bool {
	switch mode {
	case topoSameNode:
		return contains(e.nodeHints, nodeName)
	case topoSameZone:
		return contains(e.zoneHints, zone)
	}
	return true
}

// selectCluster applies the Cluster policy: ready endpoints, topology
// filtered; if there are none anywhere, serving-terminating ones.
func selectCluster(eps []*endpoint, nodeName, zone string) selection {
	mode, why := topologyMode(eps, nodeName, zone)
	sel := newSelection(len(eps))
	if why != "" {
		sel.evidence = append(sel.evidence, why)
	}
	in := make([]bool, len(eps))
	n := 0
	for i, e := range eps {
		if e.usable && e.Ready && topologyAllows(e, mode, nodeName, zone) {
			in[i], n = true, n+1
		}
	}
	fallback := n == 0
	if fallback {
		for i, e := range eps {
			if e.usable && e.servingTerminating() {
				in[i], n = true, n+1
			}
		}
	}
	for i, e := range eps {
		sel.add(e, in[i], clusterReason(e, in[i], fallback, mode))
	}
	switch {
	case n == 0:
	case fallback:
		sel.evidence = append(sel.evidence, fmt.Sprintf("policy Cluster: no ready endpoints anywhere, %d serving-terminating endpoint(s) used", n))
	default:
		sel.evidence = append(sel.evidence, fmt.Sprintf("policy Cluster: %d ready endpoint(s) used", n))
	}
	return sel.finish()
}

func clusterReason(e *endpoint, in, fallback bool, mode string) string {
	switch {
	case !e.usable:
		return e.Reason
	case e.Ready && in:
		return reasonReady
	case e.Ready && mode == topoSameNode:
		return reasonTopoOtherNode
	case e.Ready:
		return reasonTopoOtherZone
	case e.servingTerminating() && fallback:
		return reasonFallback
	case e.servingTerminating():
		return reasonTermReadyExist
	case e.Terminating:
		return reasonTermNotServing
	}
	return reasonNotReady
}

// selectLocal applies a Local policy: ready endpoints on this node; if there
// are none, serving-terminating ones on this node; topology is not used.
func selectLocal(eps []*endpoint, nodeName, policy string) selection {
	localReady := false
	for _, e := range eps {
		localReady = localReady || (e.usable && e.local && e.Ready)
	}
	sel := newSelection(len(eps))
	n := 0
	for _, e := range eps {
		in := e.usable && e.local && (e.Ready || (!localReady && e.servingTerminating()))
		if in {
			n++
		}
		sel.add(e, in, localReason(e, in, localReady))
	}
	switch {
	case n == 0:
		sel.evidence = append(sel.evidence, policy+" Local: no ready or serving-terminating endpoint on node "+nodeName)
	case localReady:
		sel.evidence = append(sel.evidence, fmt.Sprintf("%s Local: %d ready endpoint(s) on node %s used", policy, n, nodeName))
	default:
		sel.evidence = append(sel.evidence, fmt.Sprintf("%s Local: no ready endpoint on node %s, %d serving-terminating endpoint(s) used", policy, nodeName, n))
	}
	return sel.finish()
}

func localReason(e *endpoint, in, localReady bool) string {
	switch {
	case !e.usable:
		return e.Reason
	case !e.local:
		return reasonNotLocal
	case e.Ready:
		return reasonReady
	case e.servingTerminating() && in:
		return reasonFallback
	case e.servingTerminating() && localReady:
		return reasonTermLocalReady
	case e.Terminating && !e.Serving:
		return reasonTermNotServing
	}
	return reasonNotReady
}

// newSelection sizes a selection for n endpoints (each verdict of a
// changed service builds one; growing them was a fifth of that work).
func newSelection(n int) selection {
	return selection{endpoints: make([]model.Endpoint, 0, n), backends: make([]netip.AddrPort, 0, n)}
}

func (s *selection) add(e *endpoint, in bool, reason string) {
	me := e.Endpoint
	me.Included, me.Reason = in, reason
	s.endpoints = append(s.endpoints, me)
	if in {
		s.backends = append(s.backends, e.Addr)
	}
}

// finish sets the action of a selection that has endpoints somewhere: a Local
// policy without local endpoints drops.
func (s selection) finish() selection {
	s.backends = model.SortBackends(s.backends)
	s.action = model.Forward
	if len(s.backends) == 0 {
		s.action = model.Drop
		s.backends = nil
	}
	return s
}

// rejectAll is the selection when no endpoint is usable anywhere.
func rejectAll(eps []*endpoint) selection {
	sel := newSelection(len(eps))
	for _, e := range eps {
		sel.add(e, false, clusterReason(e, false, true, topoNone))
	}
	sel.action = model.Reject
	sel.evidence = append(sel.evidence, fmt.Sprintf("%s among %d endpoint(s): reject", reasonNoUsableEndpoints, len(eps)))
	return sel
}
