package bench

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netdrift/netdrift/internal/watch"
)

// NodeName is the node the generated tables belong to.
const NodeName = "node-0"

// ClusterState is the API view that makes kube-proxy write the generated
// tables: one Service and one EndpointSlice (up to 100 endpoints per slice)
// per generated service, endpoints spread over 50 nodes.
func (s Spec) ClusterState() *watch.ClusterState {
	cs := &watch.ClusterState{}
	for n := 0; n < 50; n++ {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", n)}}
		if n == 0 {
			node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: NodeIP.String()}}
		}
		cs.Nodes = append(cs.Nodes, node)
	}
	yes, no := true, false
	for _, v := range s.List() {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: v.Port.Namespace, Name: v.Port.Name},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, ClusterIP: v.ClusterIP.String(), ClusterIPs: []string{v.ClusterIP.String()},
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		if v.NodePort != 0 {
			svc.Spec.Type = corev1.ServiceTypeNodePort
			svc.Spec.Ports[0].NodePort = int32(v.NodePort)
		}
		cs.Services = append(cs.Services, svc)
		name, port, proto := "http", int32(8080), corev1.ProtocolTCP
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: v.Port.Namespace, Name: v.Port.Name + "-abcde",
				Labels: map[string]string{discoveryv1.LabelServiceName: v.Port.Name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
		}
		for i, ep := range v.Endpoints {
			node := fmt.Sprintf("node-%d", i%50)
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
				Addresses: []string{ep.Addr().String()}, NodeName: &node,
				Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no},
			})
		}
		cs.EndpointSlices = append(cs.EndpointSlices, sl)
	}
	return cs
}
