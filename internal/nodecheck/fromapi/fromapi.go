package fromapi

import (
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/watch"
)

// Node annotations in which CNIs publish a node's pod range or the
// addresses other nodes route its pods through.
var (
	podCIDRAnnotations = []string{
		"network.cilium.io/ipv4-pod-cidr", "network.cilium.io/ipv6-pod-cidr",
		"io.cilium.network.ipv4-pod-cidr", "io.cilium.network.ipv6-pod-cidr",
	}
	nodeAddrAnnotations = []string{
		"flannel.alpha.coreos.com/public-ip", "flannel.alpha.coreos.com/public-ipv6",
		"flannel.alpha.coreos.com/public-ip-overwrite",
		"projectcalico.org/IPv4Address", "projectcalico.org/IPv6Address",
		"projectcalico.org/IPv4IPIPTunnelAddr", "projectcalico.org/IPv4VXLANTunnelAddr",
		"projectcalico.org/IPv6VXLANTunnelAddr", "projectcalico.org/IPv4WireguardInterfaceAddr",
		"network.cilium.io/ipv4-cilium-host", "network.cilium.io/ipv6-cilium-host",
		"io.cilium.network.ipv4-cilium-host", "io.cilium.network.ipv6-cilium-host",
	}
)

// NodeInfoOf converts a Node: pod CIDRs from spec.podCIDRs (or podCIDR) and
// CNI annotations; addresses from status and CNI annotations; Ready and the
// Ready condition's last transition.
func NodeInfoOf(n *corev1.Node) model.NodeInfo {
	out := model.NodeInfo{Name: n.Name}
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for _, a := range podCIDRAnnotations {
		if v := n.Annotations[a]; v != "" {
			cidrs = append(cidrs, strings.Split(v, ",")...)
		}
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			out.PodCIDRs = appendPrefix(out.PodCIDRs, p.Masked())
		}
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			out.Addresses = appendAddr(out.Addresses, a.Address)
		}
	}
	for _, key := range nodeAddrAnnotations {
		if v := n.Annotations[key]; v != "" {
			out.Addresses = appendAddr(out.Addresses, v)
		}
	}
	sort.Slice(out.Addresses, func(i, j int) bool { return out.Addresses[i].Less(out.Addresses[j]) })
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Ready = c.Status == corev1.ConditionTrue
			out.ReadySince = c.LastTransitionTime.Time
		}
	}
	return out
}

// appendAddr adds an address written as "ip" or "ip/len" (Calico's form),
// once; anything else is ignored.
func appendAddr(as []netip.Addr, s string) []netip.Addr {
	a, ok := parseAddrLoose(s)
	if !ok {
		return as
	}
	for _, x := range as {
		if x == a {
			return as
		}
	}
	return append(as, a)
}

// parseAddrLoose parses an address as the API may hold it (spaces around
// it, a prefix length after it), IPv4-mapped IPv6 unmapped.
func parseAddrLoose(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func appendPrefix(ps []netip.Prefix, p netip.Prefix) []netip.Prefix {
	for _, x := range ps {
		if x == p {
			return ps
		}
	}
	return append(ps, p)
}

// PodInfoOf converts a Pod. A pod with a deletion timestamp is Terminating;
// Deleted is for callers that keep tombstones.
func PodInfoOf(p *corev1.Pod) model.PodInfo {
	out := model.PodInfo{
		Namespace:   p.Namespace,
		Name:        p.Name,
		NodeName:    p.Spec.NodeName,
		HostNetwork: p.Spec.HostNetwork,
		Terminating: p.DeletionTimestamp != nil,
	}
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	for _, ip := range ips {
		out.IPs = appendAddr(out.IPs, ip.IP)
	}
	return out
}

// EndpointInfos converts the endpoints of one EndpointSlice (addresses[0]
// only, as kube-proxy does). Slices without a service-name label are skipped.
func EndpointInfos(s *discoveryv1.EndpointSlice) []model.EndpointInfo {
	// Sized for the slice: the agent keeps one such list per slice between
	// node-level runs, and growing it by appends would leave it up to twice
	// that (see BENCHMARKS.md, Agent memory policy).
	out := appendEndpointInfos(make([]model.EndpointInfo, 0, len(s.Endpoints)), s)
	if len(out) == 0 {
		return nil
	}
	return slices.Clip(out)
}

func appendEndpointInfos(out []model.EndpointInfo, s *discoveryv1.EndpointSlice) []model.EndpointInfo {
	svc := s.Labels[discoveryv1.LabelServiceName]
	if svc == "" {
		return out
	}
	for _, e := range s.Endpoints {
		if len(e.Addresses) == 0 {
			continue
		}
		a, err := netip.ParseAddr(e.Addresses[0])
		if err != nil {
			continue
		}
		ei := model.EndpointInfo{
			Service: model.ServicePort{ServiceName: model.ServiceName{Namespace: s.Namespace, Name: svc}},
			Slice:   s.Name,
			Addr:    a.Unmap(),
			Ready:   e.Conditions.Ready == nil || *e.Conditions.Ready,
			Serving: e.Conditions.Serving == nil || *e.Conditions.Serving,
		}
		if e.NodeName != nil {
			ei.NodeName = *e.NodeName
		}
		out = append(out, ei)
	}
	return out
}

// ServiceIPs returns every IP a Service answers on: cluster IPs, external
// IPs and load-balancer ingress IPs, sorted and unique. Linear in the
// services (then a sort): every node-level run calls it on all of them.
func ServiceIPs(svcs []*corev1.Service) []netip.Addr {
	out := make([]netip.Addr, 0, len(svcs))
	add := func(s string) {
		if a, ok := parseAddrLoose(s); ok {
			out = append(out, a)
		}
	}
	for _, s := range svcs {
		if len(s.Spec.ClusterIPs) == 0 {
			add(s.Spec.ClusterIP)
		}
		for _, ip := range s.Spec.ClusterIPs {
			add(ip)
		}
		for _, ip := range s.Spec.ExternalIPs {
			add(ip)
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			add(in.IP)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// NodeCheckInputs converts cluster state into the API half of
// nodecheck.Inputs for one node: all nodes, this node's pods, every
// endpoint and every service IP (the caller adds Desired and Snapshot).
func NodeCheckInputs(nodeName string, cs *watch.ClusterState) nodecheck.Inputs {
	return NodeCheckInputsCached(nodeName, cs, nil)
}

// NodeCheckInputsCached is NodeCheckInputs converting only the
// EndpointSlices c has not seen (c nil: all of them).
func NodeCheckInputsCached(nodeName string, cs *watch.ClusterState, c *EndpointInfoCache) nodecheck.Inputs {
	in := nodecheck.Inputs{NodeName: nodeName, ServicesKnown: true, OwnNodeOnly: cs.OwnNodeOnly}
	for _, n := range cs.Nodes {
		in.Nodes = append(in.Nodes, NodeInfoOf(n))
	}
	for _, p := range cs.Pods {
		if p.Spec.NodeName == nodeName {
			in.Pods = append(in.Pods, PodInfoOf(p))
		}
	}
	if c == nil {
		in.ServiceIPs = ServiceIPs(cs.Services)
		// One list, one allocation: a one-shot conversion (the offline
		// diff) that keeps nothing pays less CPU than with per-slice lists
		// (BenchmarkNodeChecks/*/cold; see BENCHMARKS.md, Reading).
		n := 0
		for _, s := range cs.EndpointSlices {
			n += len(s.Endpoints)
		}
		if n > 0 {
			in.Endpoints = make([]model.EndpointInfo, 0, n)
		}
		for _, s := range cs.EndpointSlices {
			in.Endpoints = appendEndpointInfos(in.Endpoints, s)
		}
		return in
	}
	in.ServiceIPs = c.serviceIPs(cs.Services)
	// Per slice, shared with the cache (Inputs are read, never changed).
	c.run++
	if c.bySlice == nil {
		c.bySlice = make(map[*discoveryv1.EndpointSlice]cachedInfos, len(cs.EndpointSlices))
	}
	in.EndpointsBySlice = make([][]model.EndpointInfo, 0, len(cs.EndpointSlices))
	for _, s := range cs.EndpointSlices {
		e, ok := c.bySlice[s]
		if !ok {
			e.infos = EndpointInfos(s)
		}
		e.run = c.run
		c.bySlice[s] = e
		if len(e.infos) > 0 {
			in.EndpointsBySlice = append(in.EndpointsBySlice, e.infos)
		}
	}
	for s, e := range c.bySlice {
		if e.run != c.run {
			delete(c.bySlice, s)
		}
	}
	return in
}

// EndpointInfoCache keeps each EndpointSlice's endpoints as
// NodeCheckInputs converts them, from one node-level run to the next,
// keyed by the object itself: an informer replaces the object on every
// change and never changes a cached one in place. A run drops the slices
// it did not see. Not safe for concurrent runs.
type EndpointInfoCache struct {
	// bySlice is kept in place from run to run (a new map of every slice
	// each run cost about as much as the service IPs below).
	bySlice map[*discoveryv1.EndpointSlice]cachedInfos
	run     uint32 // runs so far: an entry not seen by this one is dropped

	// The service IPs of the last run and the services they came from:
	// under endpoint churn the services stay the same objects, and
	// parsing and sorting every IP again was a sixth of a node-level run
	// at 100k endpoints (CPU profile, nftables, 1 change/s).
	svcs map[*corev1.Service]struct{}
	ips  []netip.Addr
}

type cachedInfos struct {
	infos []model.EndpointInfo
	run   uint32
}

// serviceIPs is ServiceIPs(svcs), computed again only when svcs are not
// the objects of the last call.
func (c *EndpointInfoCache) serviceIPs(svcs []*corev1.Service) []netip.Addr {
	if c.svcs != nil && len(svcs) == len(c.svcs) {
		same := true
		for _, s := range svcs {
			if _, ok := c.svcs[s]; !ok {
				same = false
				break
			}
		}
		if same {
			return c.ips
		}
	}
	c.ips = ServiceIPs(svcs)
	c.svcs = make(map[*corev1.Service]struct{}, len(svcs))
	for _, s := range svcs {
		c.svcs[s] = struct{}{}
	}
	return c.ips
}
