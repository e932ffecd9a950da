package watch

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/model"
)

// portVerdicts builds the verdicts of one service port in one family; the
// Cluster and Local selections are computed once and shared by frontends.
type portVerdicts struct {
	sp            model.ServicePort
	eps           []*endpoint
	uncertain     string
	usable        bool
	internalLocal bool
	externalLocal bool
	sourceRanges  []string
	nodeName      string
	zone          string
	cluster       *selection
	local         *selection
}

func newPortVerdicts(svc *corev1.Service, sp *corev1.ServicePort, fam model.IPFamily,
	slices []*discoveryv1.EndpointSlice, nodeName, zone string) *portVerdicts {
	proto := protocolOf(sp.Protocol)
	pe := collectEndpoints(svc, fam, sp.Name, proto, slices, nodeName)
	p := &portVerdicts{
		sp:            model.ServicePort{ServiceName: model.ServiceName{Namespace: svc.Namespace, Name: svc.Name}, Port: sp.Name, Protocol: proto},
		eps:           pe.eps,
		usable:        hasUsable(pe.eps),
		internalLocal: internalPolicyLocal(svc),
		externalLocal: externalPolicyLocal(svc),
		sourceRanges:  svc.Spec.LoadBalancerSourceRanges,
		nodeName:      nodeName,
		zone:          zone,
	}
	reasons := pe.uncertain
	if !knownProtocol(proto) {
		reasons = append([]string{"protocol " + string(proto) + " is not one kube-proxy is known to program"}, reasons...)
	}
	p.uncertain = strings.Join(reasons, "; ")
	return p
}

// internalPolicyLocal: internalTrafficPolicy Local (nil = Cluster).
func internalPolicyLocal(svc *corev1.Service) bool {
	p := svc.Spec.InternalTrafficPolicy
	return p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal
}

// externalPolicyLocal: externalTrafficPolicy Local on an externally
// accessible service (NodePort, LoadBalancer, or ClusterIP with external IPs).
func externalPolicyLocal(svc *corev1.Service) bool {
	t := svc.Spec.Type
	accessible := t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer ||
		(t == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
	return accessible && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func (p *portVerdicts) verdict(f frontendSpec) model.Verdict {
	v := model.Verdict{Service: p.sp, Uncertain: p.uncertain}
	v.Evidence = []string{f.what + " " + f.fe.String() + "/" + string(f.fe.Protocol) + " of " + p.sp.String()}
	sel := p.selectionFor(f.external)
	v.Action = sel.action
	// The selection's backends and endpoints are shared by every frontend
	// of the service port (read-only, as all of a desired state is;
	// clipped, so an append copies): a copy per frontend would multiply the
	// agent's heap by the frontends per service port (see BENCHMARKS.md,
	// Agent memory policy).
	v.Backends = shared(sel.backends)
	v.Endpoints = shared(sel.endpoints)
	v.Evidence = append(v.Evidence, sel.evidence...)
	if f.fe.Kind == model.LoadBalancer && len(p.sourceRanges) > 0 && v.Action == model.Forward {
		v.Evidence = append(v.Evidence, "loadBalancerSourceRanges "+strings.Join(p.sourceRanges, ",")+
			": other sources are dropped by kube-proxy's firewall; the backend set is unchanged")
	}
	if f.external && p.externalLocal && p.usable {
		v.Evidence = append(v.Evidence, "externalTrafficPolicy Local: this verdict is for traffic from outside the cluster; "+
			"kube-proxy sends pod and node-local sources to the Cluster set")
	}
	return v
}

func (p *portVerdicts) selectionFor(external bool) selection {
	if !p.usable {
		if p.cluster == nil {
			s := rejectAll(p.eps)
			p.cluster = &s
		}
		return *p.cluster
	}
	switch {
	case !external && p.internalLocal:
		return p.localSel("internalTrafficPolicy")
	case external && p.externalLocal:
		return p.localSel("externalTrafficPolicy")
	}
	if p.cluster == nil {
		s := selectCluster(p.eps, p.nodeName, p.zone)
		p.cluster = &s
	}
	return *p.cluster
}

func (p *portVerdicts) localSel(policy string) selection {
	// The local set does not depend on which policy asks; only the wording does.
	if p.local == nil {
		s := selectLocal(p.eps, p.nodeName, "")
		p.local = &s
	}
	s := *p.local
	s.evidence = make([]string, len(p.local.evidence))
	for i, e := range p.local.evidence {
		s.evidence[i] = policy + e
	}
	return s
}

// shared is s clipped to its length, nil when empty.
func shared[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clip(s)
}
