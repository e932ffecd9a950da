package informer

import (
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
