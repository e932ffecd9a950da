package bench

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ClusterFile renders ClusterState as `kubectl get services,endpointslices,nodes
// -A -o json` prints it (a v1 List, 4-space indent), with the metadata a real
// cluster's objects carry: uid, resourceVersion, creationTimestamp, the
// EndpointSlice controller's labels, owner reference and trigger-time
// annotation, and a targetRef per endpoint. `netdrift diff --cluster` of it
// gives the same desired state as ClusterState.
func (s Spec) ClusterFile() []byte {
	cs := s.ClusterState()
	var items []any
	seq := 0
	meta := func(m *metav1.ObjectMeta) {
		seq++
		m.UID = fakeUID(seq)
		m.ResourceVersion = fmt.Sprint(1000 + seq)
		m.CreationTimestamp = metav1.NewTime(created)
	}
	for _, svc := range cs.Services {
		o := svc.DeepCopy()
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		meta(&o.ObjectMeta)
		o.Labels = map[string]string{"app": o.Name}
		o.Spec.Selector = map[string]string{"app": o.Name}
		o.Spec.SessionAffinity = corev1.ServiceAffinityNone
		o.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		single, cluster := corev1.IPFamilyPolicySingleStack, corev1.ServiceInternalTrafficPolicyCluster
		o.Spec.IPFamilyPolicy, o.Spec.InternalTrafficPolicy = &single, &cluster
		if o.Spec.Type == corev1.ServiceTypeNodePort {
			o.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}
		items = append(items, o)
	}
	for i, sl := range cs.EndpointSlices {
		items = append(items, sliceObject(sl, cs.Services[i], meta))
	}
	for _, n := range cs.Nodes {
		o := n.DeepCopy()
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		meta(&o.ObjectMeta)
		o.Labels = map[string]string{"kubernetes.io/hostname": o.Name, "kubernetes.io/os": "linux"}
		o.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.NewTime(created), LastTransitionTime: metav1.NewTime(created)}}
		items = append(items, o)
	}
	out, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items, "metadata": map[string]string{"resourceVersion": ""}}, "", "    ")
	if err != nil {
		panic(err) // generated objects always marshal
	}
	return append(out, '\n')
}

var created = time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)

// sliceObject is sl as the EndpointSlice controller writes it for svc.
func sliceObject(sl *discoveryv1.EndpointSlice, svc *corev1.Service, meta func(*metav1.ObjectMeta)) *discoveryv1.EndpointSlice {
	o := sl.DeepCopy()
	o.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
	meta(&o.ObjectMeta)
	o.GenerateName = svc.Name + "-"
	o.Generation = 1
	o.Labels["endpointslice.kubernetes.io/managed-by"] = "endpointslice-controller.k8s.io"
	o.Labels["app"] = svc.Name
	o.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": created.Format(time.RFC3339)}
	yes := true
	o.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name,
		UID: fakeUID(0), Controller: &yes, BlockOwnerDeletion: &yes}}
	for i := range o.Endpoints {
		ep := &o.Endpoints[i]
		ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: o.Namespace,
			Name: fmt.Sprintf("%s-7d9f8c6b5-%05d", svc.Name, i), UID: fakeUID(100000 + i)}
	}
	return o
}

func fakeUID(n int) types.UID {
	return types.UID(fmt.Sprintf("5f1c2a8e-0b3d-4e6f-9a7c-%012d", n))
}
