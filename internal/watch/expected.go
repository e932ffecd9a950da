// Package watch turns the API server's view of Services, EndpointSlices and
// Nodes into the desired datapath state of one node, with kube-proxy's
// semantics, and loads that view from files kubectl prints.
package watch

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/model"
)

// Labels kube-proxy's informers select on.
const (
	labelServiceName      = discoveryv1.LabelServiceName // kubernetes.io/service-name
	labelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	labelHeadless         = corev1.IsHeadlessService // service.kubernetes.io/headless
)

// LabelServiceProxyName is the label that hands a Service (and its
// slices) to another proxy: kube-proxy, and so the agent, skips them.
const LabelServiceProxyName = labelServiceProxyName

// ClusterState is the part of the API kube-proxy reads (plus Pods, which
// other parts of netdrift use). Objects are never modified.
type ClusterState struct {
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Nodes          []*corev1.Node
	Pods           []*corev1.Pod
	// OwnNodeOnly: Nodes holds only the agent's own Node (--watch-nodes=own),
	// so a Node missing from it is not known to be gone.
	OwnNodeOnly bool
}

// Expected computes what kube-proxy must program on node from cs. It is pure:
// the same input always gives the same output.
//
// A verdict is marked Uncertain (and must never be reported stale) when
// kube-proxy's result cannot be told from the API objects:
//   - an endpoint whose addresses[0] is not an IP, or is of the other family
//     than its slice's addressType (kube-proxy would emit rules that fail);
//   - the same ip:port in two slices, both terminating or both not, with
//     different conditions, node or hints (kube-proxy keeps whichever its map
//     iteration meets last);
//   - a service port protocol other than TCP, UDP or SCTP;
//   - one frontend (ip, port, protocol, kind) claimed by two services (both
//     rules are written; which matches first is not defined).
func Expected(node string, cs *ClusterState) model.Desired {
	d := model.Desired{Node: node, Frontends: map[model.Frontend]model.Verdict{}}
	if cs == nil {
		return d
	}
	nodeObj := findNode(cs.Nodes, node)
	slices := groupSlices(cs.EndpointSlices)
	owner := map[model.Frontend]string{}
	for _, svc := range sortedServices(cs.Services) {
		key := svc.Namespace + "/" + svc.Name
		for fe, v := range ExpectedService(nodeObj, node, svc, slices[key]) {
			addVerdict(d.Frontends, owner, fe, v, key)
		}
	}
	return d
}

// addVerdict stores v unless another service already claimed fe; a frontend
// claimed twice is programmed twice by kube-proxy and which rule matches first
// is not defined, so the verdict becomes uncertain.
func addVerdict(m map[model.Frontend]model.Verdict, owner map[model.Frontend]string, fe model.Frontend, v model.Verdict, svc string) {
	prev, ok := m[fe]
	if !ok {
		m[fe] = v
		owner[fe] = svc
		return
	}
	prev.Uncertain = "frontend " + fe.String() + "/" + string(fe.Protocol) + " is claimed by services " +
		owner[fe] + " and " + svc + "; which rule kube-proxy matches first is not defined"
	prev.Evidence = append(prev.Evidence, "also claimed by "+svc)
	m[fe] = prev
}

func findNode(nodes []*corev1.Node, name string) *corev1.Node {
	for _, n := range nodes {
		if n != nil && n.Name == name {
			return n
		}
	}
	return nil
}

// groupSlices keeps slices per service ("ns/name") and per slice name, as
// kube-proxy's EndpointSliceCache does; a later duplicate of the same slice
// replaces the earlier one. Slices kube-proxy does not watch are dropped.
func groupSlices(all []*discoveryv1.EndpointSlice) map[string][]*discoveryv1.EndpointSlice {
	byName := map[string]map[string]*discoveryv1.EndpointSlice{}
	for _, s := range all {
		if s == nil || !sliceWatched(s) {
			continue
		}
		key := s.Namespace + "/" + s.Labels[labelServiceName]
		if byName[key] == nil {
			byName[key] = map[string]*discoveryv1.EndpointSlice{}
		}
		byName[key][s.Name] = s
	}
	out := make(map[string][]*discoveryv1.EndpointSlice, len(byName))
	for key, m := range byName {
		out[key] = sortedSlices(m)
	}
	return out
}

func sortedSlices(m map[string]*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// sliceWatched mirrors kube-proxy's informer selectors and cache keys: the
// slice names its service and is not claimed by another proxy or headless.
func sliceWatched(s *discoveryv1.EndpointSlice) bool {
	if s.Labels[labelServiceName] == "" || s.Name == "" || s.Namespace == "" {
		return false
	}
	return !hasLabel(s.Labels, labelServiceProxyName) && !hasLabel(s.Labels, labelHeadless)
}

func hasLabel(labels map[string]string, key string) bool {
	_, ok := labels[key]
	return ok
}

func sortedServices(svcs []*corev1.Service) []*corev1.Service {
	out := make([]*corev1.Service, 0, len(svcs))
	for _, s := range svcs {
		if s != nil {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}
