package informer

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/internal/watch"
)

// lastApplied is the annotation `kubectl apply` writes: a full copy of the
// object as applied, which nothing here reads.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// The labels the agent reads on Services and EndpointSlices (kube-proxy's
// selection: watch.Expected), and the one EndpointSlice annotation.
var (
	sliceLabels      = []string{discoveryv1.LabelServiceName, watch.LabelServiceProxyName, corev1.IsHeadlessService}
	serviceLabels    = []string{watch.LabelServiceProxyName, corev1.IsHeadlessService}
	sliceAnnotations = []string{watch.TriggerTimeAnnotation}
)

// trim drops what the agent never reads before an object enters an informer
// cache: managed fields, owner references, finalizers, kubectl's
// last-applied copy and a Node's image list (the bulk of a Node object); on
// EndpointSlices and Services every label and annotation it does not read
// (the EndpointSlice controller copies the Service's labels onto each
// slice), and an endpoint's target reference, hostname and deprecated
// topology; an endpoint's node name and zone point to one shared copy per
// value (a cluster has few of either). At 100k endpoints the caches are most of the agent's memory;
// everything the desired state and the checks read is kept (the labels
// above, the trigger-time annotation, specs, addresses, conditions, node
// names, zones, hints).
func trim(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		m.SetOwnerReferences(nil)
		m.SetFinalizers(nil)
		if a := m.GetAnnotations(); a[lastApplied] != "" {
			m.SetAnnotations(without(a, lastApplied))
		}
	}
	switch o := obj.(type) {
	case *corev1.Node:
		o.Status.Images = nil
	case *discoveryv1.EndpointSlice:
		o.Labels = only(o.Labels, sliceLabels)
		o.Annotations = only(o.Annotations, sliceAnnotations)
		for i := range o.Endpoints {
			e := &o.Endpoints[i]
			e.TargetRef, e.Hostname, e.DeprecatedTopology = nil, nil, nil
			e.NodeName, e.Zone = names.of(e.NodeName), names.of(e.Zone)
		}
	case *corev1.Service:
		o.Labels = only(o.Labels, serviceLabels)
		o.Annotations = nil
	}
	return obj, nil
}

// only is m with just the keys given (nil when none is there); m itself
// when it holds nothing else.
func only(m map[string]string, keys []string) map[string]string {
	n := 0
	for _, k := range keys {
		if _, ok := m[k]; ok {
			n++
		}
	}
	switch {
	case n == len(m):
		return m
	case n == 0:
		return nil
	}
	out := make(map[string]string, n)
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

func without(m map[string]string, key string) map[string]string {
	out := make(map[string]string, len(m)-1)
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// names holds one copy of each node name and zone the EndpointSlices
// carry: every endpoint had its own (a pointer and a string, ~50 bytes an
// endpoint). Cache objects are read-only (client-go's contract), so the
// endpoints share the pointer.
var names = interner{m: map[string]*string{}}

// internMax bounds the interner: past it the table starts again (names of
// nodes long gone are not kept forever).
const internMax = 1 << 16

type interner struct {
	mu sync.Mutex
	m  map[string]*string
}

// of is the shared pointer for *p's value (nil for nil).
func (in *interner) of(p *string) *string {
	if p == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if q, ok := in.m[*p]; ok {
		return q
	}
	if len(in.m) >= internMax {
		clear(in.m)
	}
	in.m[*p] = p
	return p
}
