package fromapi

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/watch"
)

func TestNodeInfoOf(t *testing.T) {
	since := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-a", Annotations: map[string]string{
			"network.cilium.io/ipv4-pod-cidr":       "10.0.5.0/24",
			"projectcalico.org/IPv4Address":         "192.168.1.10/24",
			"projectcalico.org/IPv4VXLANTunnelAddr": "10.244.64.0",
			"flannel.alpha.coreos.com/public-ip":    "192.168.1.10",
			"projectcalico.org/IPv6Address":         "not-an-address",
		}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "192.168.1.10"},
				{Type: corev1.NodeHostName, Address: "worker-a"},
				{Type: corev1.NodeInternalIP, Address: "fd00:192::10"},
			},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(since)},
			},
		},
	}
	got := NodeInfoOf(n)
	if fmt.Sprint(got.PodCIDRs) != "[10.244.1.0/24 fd00:10:244:1::/64 10.0.5.0/24]" {
		t.Errorf("podCIDRs %v", got.PodCIDRs)
	}
	if fmt.Sprint(got.Addresses) != "[10.244.64.0 192.168.1.10 fd00:192::10]" {
		t.Errorf("addresses %v", got.Addresses)
	}
	if got.Ready || !got.ReadySince.Equal(since) {
		t.Errorf("ready %v since %v", got.Ready, got.ReadySince)
	}
	old := NodeInfoOf(&corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.244.7.9/24"}})
	if fmt.Sprint(old.PodCIDRs) != "[10.244.7.0/24]" || old.Ready || !old.ReadySince.IsZero() {
		t.Errorf("single podCIDR, no condition: %+v", old)
	}
}

func TestPodInfoOf(t *testing.T) {
	del := metav1.Now()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart-1", DeletionTimestamp: &del},
		Spec:       corev1.PodSpec{NodeName: "worker-a"},
		Status:     corev1.PodStatus{PodIP: "10.244.1.5", PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}, {IP: "fd00:10:244:1::5"}}},
	}
	got := PodInfoOf(p)
	if got.String() != "shop/cart-1" || got.NodeName != "worker-a" || !got.Terminating || got.Deleted ||
		fmt.Sprint(got.IPs) != "[10.244.1.5 fd00:10:244:1::5]" {
		t.Errorf("%+v", got)
	}
	legacy := PodInfoOf(&corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}, Status: corev1.PodStatus{PodIP: "192.168.1.10"}})
	if !legacy.HostNetwork || fmt.Sprint(legacy.IPs) != "[192.168.1.10]" {
		t.Errorf("%+v", legacy)
	}
}

func TestEndpointInfos(t *testing.T) {
	f, node := false, "worker-c"
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: "cart"}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.2.5", "10.244.2.6"}, NodeName: &node},
			{Addresses: []string{"10.244.2.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &f, Serving: &f}},
			{Addresses: nil},
			{Addresses: []string{"bogus"}},
		},
	}
	got := EndpointInfos(s)
	if len(got) != 2 {
		t.Fatalf("got %+v", got)
	}
	if got[0].Service.Service() != "shop/cart" || got[0].Slice != "cart-abc" || got[0].Addr.String() != "10.244.2.5" ||
		got[0].NodeName != "worker-c" || !got[0].Ready || !got[0].Serving {
		t.Errorf("first: %+v", got[0])
	}
	if got[1].NodeName != "" || got[1].Ready || got[1].Serving {
		t.Errorf("second: %+v", got[1])
	}
	s.Labels = nil
	if EndpointInfos(s) != nil {
		t.Error("slice without service-name label must be skipped")
	}
}

func TestServiceIPsAndInputs(t *testing.T) {
	svcs := []*corev1.Service{
		{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10", "fd00:96::10"}, ExternalIPs: []string{"203.0.113.7"}}},
		{Spec: corev1.ServiceSpec{ClusterIP: "None"}},
		{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1"}, Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{
			Ingress: []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}, {Hostname: "lb.example"}}}}},
		// the same addresses again, one IPv4-mapped and one with a prefix length
		{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.99/32", ExternalIPs: []string{"::ffff:10.96.0.1", " 203.0.113.7"}}},
	}
	if got := fmt.Sprint(ServiceIPs(svcs)); got != "[10.96.0.1 10.96.0.10 10.96.0.99 198.51.100.1 203.0.113.7 fd00:96::10]" {
		t.Errorf("service IPs %s", got)
	}
	cs := &watch.ClusterState{
		Services: svcs,
		Nodes:    []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}},
		Pods: []*corev1.Pod{
			{ObjectMeta: metav1.ObjectMeta{Name: "here"}, Spec: corev1.PodSpec{NodeName: "a"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "there"}, Spec: corev1.PodSpec{NodeName: "b"}},
		},
	}
	in := NodeCheckInputs("a", cs)
	if in.NodeName != "a" || len(in.Nodes) != 2 || len(in.Pods) != 1 || in.Pods[0].Name != "here" ||
		!in.ServicesKnown || len(in.ServiceIPs) != 6 {
		t.Errorf("%+v", in)
	}
}

// TestNodeCheckInputsCached: the cache gives the same endpoints as a fresh
// conversion (per slice, not copied into one list), converts a replaced
// slice again (the informer's update) and forgets a slice once a run no
// longer sees it.
func TestNodeCheckInputsCached(t *testing.T) {
	slice := func(name, addr string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{addr}, NodeName: ptr("a")}},
		}
	}
	flat := func(in nodecheck.Inputs) []model.EndpointInfo {
		return slices.Concat(append([][]model.EndpointInfo{in.Endpoints}, in.EndpointsBySlice...)...)
	}
	a, b := slice("web-1", "10.1.0.1"), slice("web-2", "10.1.0.2")
	cs := &watch.ClusterState{EndpointSlices: []*discoveryv1.EndpointSlice{a, b}}
	var c EndpointInfoCache
	first := NodeCheckInputsCached("a", cs, &c)
	fresh := NodeCheckInputs("a", cs)
	if !reflect.DeepEqual(flat(first), fresh.Endpoints) || len(fresh.Endpoints) != 2 || len(first.EndpointsBySlice) != 2 {
		t.Fatalf("cached endpoints %+v differ from a fresh conversion %+v", flat(first), fresh.Endpoints)
	}
	// The informer replaces b: the new object is converted, a is reused.
	b2 := slice("web-2", "10.1.0.9")
	cs.EndpointSlices = []*discoveryv1.EndpointSlice{a, b2}
	reusedA := c.bySlice[a].infos
	second := flat(NodeCheckInputsCached("a", cs, &c))
	if got := second[1].Addr.String(); len(second) != 2 || got != "10.1.0.9" {
		t.Errorf("replaced slice: endpoints %+v, want the second at 10.1.0.9", second)
	}
	if len(c.bySlice) != 2 || &c.bySlice[a].infos[0] != &reusedA[0] {
		t.Errorf("unchanged slice converted again, or the replaced one kept: %d slices cached", len(c.bySlice))
	}
	if _, ok := c.bySlice[b]; ok {
		t.Error("the replaced slice is still cached")
	}
}

// TestNodeCheckInputsCachedServiceIPs: the service IPs are worked out
// again only when the services are not the objects of the last run.
func TestNodeCheckInputsCachedServiceIPs(t *testing.T) {
	svc := func(name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}}}
	}
	a, b := svc("a", "10.96.0.2"), svc("b", "10.96.0.1")
	cs := &watch.ClusterState{Services: []*corev1.Service{a, b}}
	var c EndpointInfoCache
	first := NodeCheckInputsCached("n", cs, &c).ServiceIPs
	if !reflect.DeepEqual(first, ServiceIPs(cs.Services)) || len(first) != 2 {
		t.Fatalf("cached service IPs %v, want %v", first, ServiceIPs(cs.Services))
	}
	cs.Services = []*corev1.Service{b, a} // the same objects, listed in another order
	if again := NodeCheckInputsCached("n", cs, &c).ServiceIPs; &again[0] != &first[0] {
		t.Error("the same services: IPs worked out again")
	}
	cs.Services = []*corev1.Service{a, svc("b", "10.96.0.9")} // b replaced
	got := NodeCheckInputsCached("n", cs, &c).ServiceIPs
	if want := ServiceIPs(cs.Services); !reflect.DeepEqual(got, want) || got[1].String() != "10.96.0.9" {
		t.Errorf("after b was replaced: %v, want %v", got, want)
	}
	cs.Services = cs.Services[:1] // b deleted
	if got := NodeCheckInputsCached("n", cs, &c).ServiceIPs; len(got) != 1 || got[0].String() != "10.96.0.2" {
		t.Errorf("after b was deleted: %v, want [10.96.0.2]", got)
	}
}

func ptr[T any](v T) *T { return &v }
