package informer

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lastApplied is the annotation `kubectl apply` writes: a full copy of the
// object as applied, which nothing here reads.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trim drops what the agent never reads before an object enters an informer
// cache: managed fields, kubectl's last-applied copy and a Node's image list
// (the bulk of a Node object). At 100k endpoints the caches are most of the
// agent's memory; everything the desired state and the checks read is kept
// (labels, the trigger-time annotation, specs, addresses, conditions).
func trim(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a[lastApplied] != "" {
			b := make(map[string]string, len(a)-1)
			for k, v := range a {
				if k != lastApplied {
					b[k] = v
				}
			}
			m.SetAnnotations(b)
		}
	}
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
	}
	return obj, nil
}
