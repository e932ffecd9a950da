package watch

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Builders for table tests. Defaults: namespace "ns", service port "http"
// 80/TCP -> 8080, cluster IP 10.96.0.1, slices of addressType IPv4.

func ptr[T any](v T) *T { return &v }

var (
	yes = ptr(true)
	no  = ptr(false)
)

type svcOpt func(*corev1.Service)

func svc(name string, opts ...svcOpt) *corev1.Service {
	s := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  "10.96.0.1",
			ClusterIPs: []string{"10.96.0.1"},
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func clusterIPs(ips ...string) svcOpt {
	return func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = ips[0], ips }
}

func svcType(t corev1.ServiceType) svcOpt { return func(s *corev1.Service) { s.Spec.Type = t } }

func nodePort(p int32) svcOpt {
	return func(s *corev1.Service) {
		if s.Spec.Type == corev1.ServiceTypeClusterIP {
			s.Spec.Type = corev1.ServiceTypeNodePort
		}
		s.Spec.Ports[0].NodePort = p
	}
}

func externalIPs(ips ...string) svcOpt {
	return func(s *corev1.Service) { s.Spec.ExternalIPs = ips }
}

func lbIngress(ip string, mode *corev1.LoadBalancerIPMode) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip, IPMode: mode})
	}
}

func iTPLocal(s *corev1.Service) {
	s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
}

func eTPLocal(s *corev1.Service) {
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
}

func svcLabel(k, v string) svcOpt {
	return func(s *corev1.Service) {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[k] = v
	}
}

func ports(ps ...corev1.ServicePort) svcOpt { return func(s *corev1.Service) { s.Spec.Ports = ps } }

type sliceOpt func(*discoveryv1.EndpointSlice)

// slice builds slice name of service svcName with the given endpoints and the
// port "http" 8080/TCP.
func slice(name, svcName string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{slicePort("http", 8080, corev1.ProtocolTCP)},
	}
}

func with(s *discoveryv1.EndpointSlice, opts ...sliceOpt) *discoveryv1.EndpointSlice {
	for _, o := range opts {
		o(s)
	}
	return s
}

func addrType(t discoveryv1.AddressType) sliceOpt {
	return func(s *discoveryv1.EndpointSlice) { s.AddressType = t }
}

func slicePorts(ps ...discoveryv1.EndpointPort) sliceOpt {
	return func(s *discoveryv1.EndpointSlice) { s.Ports = ps }
}

func sliceLabel(k, v string) sliceOpt {
	return func(s *discoveryv1.EndpointSlice) { s.Labels[k] = v }
}

func slicePort(name string, port int32, proto corev1.Protocol) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr(name), Port: ptr(port), Protocol: ptr(proto)}
}

type epOpt func(*discoveryv1.Endpoint)

// ep builds a ready, serving, non-terminating endpoint (conditions explicit).
func ep(ip, node string, opts ...epOpt) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: yes, Serving: yes, Terminating: no},
	}
	if node != "" {
		e.NodeName = ptr(node)
	}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func cond(ready, serving, terminating *bool) epOpt {
	return func(e *discoveryv1.Endpoint) {
		e.Conditions = discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}
	}
}

// terminatingServing / terminatingGone / notReady: the usual condition sets.
var (
	terminatingServing = cond(no, yes, yes)
	terminatingGone    = cond(no, no, yes)
	notReady           = cond(no, no, no)
)

func zoneHints(zones ...string) epOpt {
	return func(e *discoveryv1.Endpoint) {
		if e.Hints == nil {
			e.Hints = &discoveryv1.EndpointHints{}
		}
		for _, z := range zones {
			e.Hints.ForZones = append(e.Hints.ForZones, discoveryv1.ForZone{Name: z})
		}
	}
}

func nodeHints(nodes ...string) epOpt {
	return func(e *discoveryv1.Endpoint) {
		if e.Hints == nil {
			e.Hints = &discoveryv1.EndpointHints{}
		}
		for _, n := range nodes {
			e.Hints.ForNodes = append(e.Hints.ForNodes, discoveryv1.ForNode{Name: n})
		}
	}
}

func addrs(more ...string) epOpt {
	return func(e *discoveryv1.Endpoint) { e.Addresses = append(e.Addresses, more...) }
}

func node(name, zone string) *corev1.Node {
	n := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
	}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	return n
}

// defaultNodes: node-a in zone za, node-b in zone zb, node-c without a zone.
func defaultNodes() []*corev1.Node {
	return []*corev1.Node{node("node-a", "za"), node("node-b", "zb"), node("node-c", "")}
}

func ips(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s.%d", prefix, i+1)
	}
	return out
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
