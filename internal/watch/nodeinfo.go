package watch

import (
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
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
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return as
	}
	a = a.Unmap()
	for _, x := range as {
		if x == a {
			return as
		}
	}
	return append(as, a)
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
	return appendEndpointInfos(nil, s)
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
			Service: model.ServicePort{Namespace: s.Namespace, Name: svc},
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
// IPs and load-balancer ingress IPs, sorted and unique.
func ServiceIPs(svcs []*corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, s := range svcs {
		ips := append([]string{}, s.Spec.ClusterIPs...)
		if len(ips) == 0 {
			ips = append(ips, s.Spec.ClusterIP)
		}
		ips = append(ips, s.Spec.ExternalIPs...)
		for _, in := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP)
		}
		for _, ip := range ips {
			out = appendAddr(out, ip)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// NodeCheckInputs converts cluster state into the API half of
// nodecheck.Inputs for one node: all nodes, this node's pods, every
// endpoint and every service IP (the caller adds Desired and Snapshot).
func NodeCheckInputs(nodeName string, cs *ClusterState) nodecheck.Inputs {
	in := nodecheck.Inputs{NodeName: nodeName, ServicesKnown: true, ServiceIPs: ServiceIPs(cs.Services)}
	for _, n := range cs.Nodes {
		in.Nodes = append(in.Nodes, NodeInfoOf(n))
	}
	for _, p := range cs.Pods {
		if p.Spec.NodeName == nodeName {
			in.Pods = append(in.Pods, PodInfoOf(p))
		}
	}
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
