package clusterfile

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/netdrift/netdrift/internal/watch"
)

// addGuessed decodes the next value (decode) as an object of kind (kubectl
// prints a List's items grouped by kind) and adds it when it is one that
// addObject would add, decoded the same; false (nothing added) when it is
// anything else, for addObject to decode.
func addGuessed(cs *watch.ClusterState, kind string, decode func(any) error) bool {
	switch kind {
	case "Service":
		g := &struct {
			corev1.Service
			itemsField
		}{}
		return guess(decode, g, &g.Service, &g.itemsField, kind) && appendTo(&cs.Services, &g.Service)
	case "EndpointSlice":
		g := &struct {
			discoveryv1.EndpointSlice
			itemsField
		}{}
		return guess(decode, g, &g.EndpointSlice, &g.itemsField, kind) && appendTo(&cs.EndpointSlices, &g.EndpointSlice)
	case "Node":
		g := &struct {
			corev1.Node
			itemsField
		}{}
		return guess(decode, g, &g.Node, &g.itemsField, kind) && appendTo(&cs.Nodes, &g.Node)
	case "Pod":
		g := &struct {
			corev1.Pod
			itemsField
		}{}
		return guess(decode, g, &g.Pod, &g.itemsField, kind) && appendTo(&cs.Pods, &g.Pod)
	}
	return false
}

// itemsField takes the member addObject's first decoding (into typeMeta)
// would fail on: an "items" (in any letter case) that is no array. None of
// the four kinds has a field of that name.
type itemsField struct {
	Items json.RawMessage `json:"items"`
}

type kubeObject interface {
	GetObjectKind() schema.ObjectKind
	GetName() string
}

// guess decodes the value into g (o and items embedded in it) and reports
// whether it is what addObject adds: of kind, with the apiVersion it wants,
// a name, and nothing that fails its typeMeta decoding.
func guess(decode func(any) error, g any, o kubeObject, items *itemsField, kind string) bool {
	if decode(g) != nil {
		return false
	}
	tm, ok := o.GetObjectKind().(*metav1.TypeMeta)
	if !ok || tm.Kind != kind || tm.APIVersion != wantedKinds[kind] || o.GetName() == "" {
		return false
	}
	return items.Items == nil || unmarshalV1(items.Items, &[]json.RawMessage{}) == nil
}

func appendTo[T any](list *[]*T, o *T) bool {
	*list = append(*list, o)
	return true
}
