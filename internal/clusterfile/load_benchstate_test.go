package clusterfile

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netdrift/netdrift/internal/watch"
)

// benchState: services services with perSvc endpoints each over nodes nodes,
// one slice per 100 endpoints, a quarter of the services with iTP Local and
// a tenth of the endpoints terminating (the shape of watch's BenchmarkExpected).
func benchState(services, perSvc, nodes int) *watch.ClusterState {
	cs := &watch.ClusterState{}
	for n := 0; n < nodes; n++ {
		cs.Nodes = append(cs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("node-%d", n), Labels: map[string]string{corev1.LabelTopologyZone: fmt.Sprintf("z%d", n%3)}}})
	}
	for s := 0; s < services; s++ {
		name := fmt.Sprintf("s%04d", s)
		cs.Services = append(cs.Services, benchService(name, s))
		var eps []discoveryv1.Endpoint
		for e := 0; e < perSvc; e++ {
			eps = append(eps, benchEndpoint(fmt.Sprintf("10.%d.%d.%d", 100+s/250, s%250, e%250+1), fmt.Sprintf("node-%d", e%nodes), e%10 == 9))
			if len(eps) == 100 || e == perSvc-1 {
				cs.EndpointSlices = append(cs.EndpointSlices, benchSlice(fmt.Sprintf("%s-%d", name, e/100), name, eps))
				eps = nil
			}
		}
	}
	return cs
}

func benchService(name string, s int) *corev1.Service {
	ip := fmt.Sprintf("10.96.%d.%d", s/250, s%250+1)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80,
				TargetPort: intstr.FromInt32(8080), NodePort: int32(30000 + s)}},
		},
	}
	if s%4 == 0 {
		local := corev1.ServiceInternalTrafficPolicyLocal
		svc.Spec.InternalTrafficPolicy = &local
	}
	return svc
}

func benchEndpoint(ip, node string, terminating bool) discoveryv1.Endpoint {
	ready, serving, term := !terminating, true, terminating
	return discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: &node,
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &term}}
}

func benchSlice(name, svcName string, eps []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	port, proto, pname := int32(8080), corev1.ProtocolTCP, "http"
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
		Ports: []discoveryv1.EndpointPort{{Name: &pname, Port: &port, Protocol: &proto}},
	}
}
