package watch

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/model"
)

const labelZone = corev1.LabelTopologyZone

// ExpectedService computes the frontends one Service must have on a node and
// their verdicts. node may be nil (then no zone is known); nodeName decides
// which endpoints are local. slices may include slices of other services:
// only the service's own watched slices are used. The live agent calls it for
// changed services only; Expected calls it for all.
func ExpectedService(node *corev1.Node, nodeName string, svc *corev1.Service,
	slices []*discoveryv1.EndpointSlice) map[model.Frontend]model.Verdict {
	out := map[model.Frontend]model.Verdict{}
	if svc == nil || skipService(svc) {
		return out
	}
	zone := ""
	if node != nil {
		zone = node.Labels[labelZone]
	}
	for _, fc := range serviceFamilies(svc) {
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			if sp.Port <= 0 || sp.Port > 65535 {
				continue
			}
			pv := newPortVerdicts(svc, sp, fc.family, slices, nodeName, zone)
			for _, f := range frontendsFor(svc, sp, fc) {
				out[f.fe] = pv.verdict(f)
			}
		}
	}
	return out
}

// skipService mirrors kube-proxy: headless (ClusterIP None or empty),
// ExternalName, and services labelled for another proxy or as headless.
func skipService(svc *corev1.Service) bool {
	if hasLabel(svc.Labels, labelServiceProxyName) || hasLabel(svc.Labels, labelHeadless) {
		return true
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		return true
	}
	return svc.Spec.Type == corev1.ServiceTypeExternalName
}

// familyClusterIP is the cluster IP a service has in one family.
type familyClusterIP struct {
	family model.IPFamily
	ip     netip.Addr
}

// serviceFamilies returns the first cluster IP of each family, in
// spec.clusterIPs order (spec.clusterIP when clusterIPs is empty), as
// kube-proxy's per-family proxiers pick them. Unparsable IPs are skipped.
func serviceFamilies(svc *corev1.Service) []familyClusterIP {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []familyClusterIP
	seen := map[model.IPFamily]bool{}
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" {
			continue
		}
		ip = ip.Unmap()
		fam := model.FamilyOf(ip)
		if !seen[fam] {
			seen[fam] = true
			out = append(out, familyClusterIP{family: fam, ip: ip})
		}
	}
	return out
}

// frontendSpec is one frontend and whether it is "external" traffic
// (node port, external IP, load balancer) for the traffic policies.
type frontendSpec struct {
	fe       model.Frontend
	external bool
	what     string
}

// frontendsFor lists the frontends of one service port in one family:
// the cluster IP, the node port, external IPs and load-balancer ingress IPs
// of the family (ingress with ipMode Proxy is not programmed by kube-proxy).
func frontendsFor(svc *corev1.Service, sp *corev1.ServicePort, fc familyClusterIP) []frontendSpec {
	proto := protocolOf(sp.Protocol)
	port := uint16(sp.Port)
	out := []frontendSpec{{fe: model.NewFrontend(fc.ip, port, proto, model.ClusterIP), what: "cluster IP"}}
	if sp.NodePort > 0 && sp.NodePort <= 65535 {
		out = append(out, frontendSpec{fe: model.NewNodePort(uint16(sp.NodePort), proto, fc.family), external: true, what: "node port"})
	}
	for _, s := range svc.Spec.ExternalIPs {
		if ip, ok := familyAddr(s, fc.family); ok {
			out = append(out, frontendSpec{fe: model.NewFrontend(ip, port, proto, model.ExternalIP), external: true, what: "external IP"})
		}
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IPMode != nil && *ing.IPMode != corev1.LoadBalancerIPModeVIP {
			continue
		}
		if ip, ok := familyAddr(ing.IP, fc.family); ok {
			out = append(out, frontendSpec{fe: model.NewFrontend(ip, port, proto, model.LoadBalancer), external: true, what: "load-balancer IP"})
		}
	}
	return out
}

func familyAddr(s string, fam model.IPFamily) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" || model.FamilyOf(ip) != fam {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// protocolOf maps the API protocol; empty is the API default, TCP.
func protocolOf(p corev1.Protocol) model.Protocol {
	if p == "" {
		return model.TCP
	}
	return model.Protocol(p)
}

func knownProtocol(p model.Protocol) bool {
	return p == model.TCP || p == model.UDP || p == model.SCTP
}
