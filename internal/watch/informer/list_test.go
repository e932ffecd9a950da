package informer

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestListServices(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart"}, Spec: corev1.ServiceSpec{ClusterIP: "10.97.233.167"}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "cart"}}, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.214.1.41"}}}},
	)
	cs, err := ListServices(context.Background(), client)
	if err != nil || len(cs.Services) != 1 || cs.Services[0].Name != "cart" || len(cs.EndpointSlices) != 1 ||
		cs.EndpointSlices[0].Endpoints[0].Addresses[0] != "10.214.1.41" {
		t.Fatalf("%+v %v", cs, err)
	}
}
