package informer

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTrimKeepsWhatTheAgentReads: managed fields, kubectl's last-applied copy
// and a Node's images go; labels, the trigger-time annotation, addresses and
// conditions stay.
func TestTrimKeepsWhatTheAgentReads(t *testing.T) {
	trigger := "endpoints.kubernetes.io/last-change-trigger-time"
	meta := metav1.ObjectMeta{
		Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
		Annotations:   map[string]string{trigger: "2026-12-01T10:00:00Z", lastApplied: "{...}"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
	}
	sl := &discoveryv1.EndpointSlice{ObjectMeta: meta, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}
	if _, err := trim(sl); err != nil {
		t.Fatal(err)
	}
	if sl.ManagedFields != nil || sl.Annotations[lastApplied] != "" {
		t.Errorf("not trimmed: %+v", sl.ObjectMeta)
	}
	if sl.Annotations[trigger] == "" || sl.Labels[discoveryv1.LabelServiceName] != "web" || len(sl.Endpoints) != 1 {
		t.Errorf("trimmed too much: %+v", sl)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ManagedFields: meta.ManagedFields},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"a"}}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.99.0.11"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if _, err := trim(n); err != nil {
		t.Fatal(err)
	}
	if n.Status.Images != nil || n.ManagedFields != nil || len(n.Status.Addresses) != 1 || len(n.Status.Conditions) != 1 {
		t.Errorf("node: %+v", n.Status)
	}
}

// TestTrimSlicesAndServices: on EndpointSlices and Services only the labels
// and the annotation the agent reads stay, with every field the desired
// state reads (addresses, conditions, node names, zones, hints, ports).
func TestTrimSlicesAndServices(t *testing.T) {
	trigger := "endpoints.kubernetes.io/last-change-trigger-time"
	own := []metav1.OwnerReference{{Kind: "Service", Name: "web", UID: "u1"}}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", OwnerReferences: own, Finalizers: []string{"x"},
			Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
				"app.kubernetes.io/name": "web", "helm.sh/chart": "web-1.2.3"},
			Annotations: map[string]string{trigger: "2026-12-01T10:00:00Z", "meta.helm.sh/release-name": "web"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true)},
			NodeName:   ptrTo("n1"), Zone: ptrTo("z1"), Hostname: ptrTo("web-0"),
			TargetRef:          &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-0", UID: "p1"},
			DeprecatedTopology: map[string]string{"kubernetes.io/hostname": "n1"},
			Hints:              &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "z1"}}}}},
		Ports: []discoveryv1.EndpointPort{{Port: ptrTo[int32](8080)}},
	}
	if _, err := trim(sl); err != nil {
		t.Fatal(err)
	}
	if len(sl.Labels) != 1 || sl.Labels[discoveryv1.LabelServiceName] != "web" || len(sl.Annotations) != 1 || sl.Annotations[trigger] == "" {
		t.Errorf("slice labels %v, annotations %v: want only the service name and the trigger time", sl.Labels, sl.Annotations)
	}
	e := sl.Endpoints[0]
	if sl.OwnerReferences != nil || sl.Finalizers != nil || e.TargetRef != nil || e.Hostname != nil || e.DeprecatedTopology != nil {
		t.Errorf("slice not trimmed: %+v", sl)
	}
	if *e.NodeName != "n1" || *e.Zone != "z1" || !*e.Conditions.Ready || e.Hints == nil || len(sl.Ports) != 1 || e.Addresses[0] != "10.0.0.1" {
		t.Errorf("slice trimmed too much: %+v", e)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web", corev1.IsHeadlessService: ""},
			Annotations: map[string]string{"meta.helm.sh/release-name": "web"}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := trim(svc); err != nil {
		t.Fatal(err)
	}
	if _, ok := svc.Labels[corev1.IsHeadlessService]; !ok || len(svc.Labels) != 1 || svc.Annotations != nil {
		t.Errorf("service labels %v, annotations %v: want only the headless label", svc.Labels, svc.Annotations)
	}
	if svc.Spec.ClusterIP != "10.96.0.10" || len(svc.Spec.Ports) != 1 {
		t.Errorf("service spec trimmed: %+v", svc.Spec)
	}
	// A slice holding only what is read keeps its maps as they are.
	keep := map[string]string{discoveryv1.LabelServiceName: "web"}
	if got := only(keep, sliceLabels); len(got) != 1 || got[discoveryv1.LabelServiceName] != "web" {
		t.Errorf("only: %v", got)
	}
}

func ptrTo[T any](v T) *T { return &v }

// Endpoints with the same node name or zone share one copy; the values are
// unchanged, and a full table starts again.
func TestTrimSharesNodeNamesAndZones(t *testing.T) {
	mk := func(node, zone string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, NodeName: ptrTo(node), Zone: ptrTo(zone)},
			{Addresses: []string{"10.0.0.2"}, NodeName: ptrTo(node)}}}
	}
	a, b, c := mk("trim-n1", "trim-z1"), mk("trim-n1", "trim-z1"), mk("trim-n2", "trim-z1")
	for _, s := range []*discoveryv1.EndpointSlice{a, b, c} {
		if _, err := trim(s); err != nil {
			t.Fatal(err)
		}
	}
	ea, eb, ec := a.Endpoints, b.Endpoints, c.Endpoints
	if ea[0].NodeName != eb[0].NodeName || ea[0].NodeName != ea[1].NodeName || ea[0].Zone != ec[0].Zone {
		t.Error("equal node names or zones not shared")
	}
	if ea[0].NodeName == ec[0].NodeName || *ec[0].NodeName != "trim-n2" || *ea[0].NodeName != "trim-n1" || *eb[0].Zone != "trim-z1" {
		t.Errorf("values changed: %q %q %q", *ea[0].NodeName, *ec[0].NodeName, *eb[0].Zone)
	}
	if ea[1].Zone != nil {
		t.Error("a nil zone became a value")
	}

	in := interner{m: map[string]*string{}}
	for i := range internMax + 1 {
		in.of(ptrTo(fmt.Sprint(i)))
	}
	if len(in.m) != 1 {
		t.Errorf("interner holds %d names after overflowing, want 1 (started again)", len(in.m))
	}
}
