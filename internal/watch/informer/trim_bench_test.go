package informer

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// realisticSlice is an EndpointSlice as the EndpointSlice controller writes
// it for a Helm-installed Deployment's Service: the Service's labels copied,
// an owner reference, and per endpoint a target reference, node name, zone
// and conditions (the lab's synthetic slices carry none of that).
func realisticSlice(i, eps int) *discoveryv1.EndpointSlice {
	name := fmt.Sprintf("svc-%05d", i)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name + "-x7k2p", GenerateName: name + "-",
			UID: types.UID(fmt.Sprintf("6f1c2a9e-0000-4000-8000-%012d", i)), ResourceVersion: "123456789",
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
				"app.kubernetes.io/name": name, "app.kubernetes.io/instance": "shop", "app.kubernetes.io/managed-by": "Helm",
				"helm.sh/chart": "shop-1.2.3", "app.kubernetes.io/version": "1.2.3"},
			Annotations:     map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-02T10:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name, UID: "0b9d-svc", Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("http"), Protocol: ptrTo(corev1.ProtocolTCP), Port: ptrTo[int32](8080)}},
	}
	for j := range eps {
		pod := fmt.Sprintf("%s-7d9f8b6c5-%05d", name, j)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 64+i/256%64, i%256, j)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true), Serving: ptrTo(true), Terminating: ptrTo(false)},
			NodeName:   ptrTo(fmt.Sprintf("node-%03d", (i+j)%200)), Zone: ptrTo("zone-a"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: pod,
				UID: types.UID(fmt.Sprintf("a3e5-%05d-%05d", i, j))},
		})
	}
	return s
}

// BenchmarkTrimRetained: the heap an informer cache keeps per endpoint of
// realistic EndpointSlices (1,000 slices of 10, decoded from protobuf as
// client-go decodes a watch), without and with trim. The figure is
// retained-B/endpoint; the loop time is not the point.
func BenchmarkTrimRetained(b *testing.B) {
	const slices, eps = 1000, 10
	wire := make([][]byte, slices)
	for i := range wire {
		w, err := realisticSlice(i, eps).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		wire[i] = w
	}
	for _, trimmed := range []bool{false, true} {
		b.Run(map[bool]string{false: "as-decoded", true: "trimmed"}[trimmed], func(b *testing.B) {
			var per float64
			for b.Loop() {
				before := liveHeap()
				kept := make([]*discoveryv1.EndpointSlice, slices)
				for i, w := range wire {
					s := &discoveryv1.EndpointSlice{}
					if err := s.Unmarshal(w); err != nil {
						b.Fatal(err)
					}
					if trimmed {
						_, _ = trim(s)
					}
					kept[i] = s
				}
				per = float64(liveHeap()-before) / (slices * eps)
				runtime.KeepAlive(kept)
			}
			b.ReportMetric(per, "retained-B/endpoint")
		})
	}
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
