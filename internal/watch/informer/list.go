package informer

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netdrift/netdrift/internal/watch"
)

// ListServices lists every Service and EndpointSlice once (no informer):
// what a one-shot command needs to resolve Service addresses.
func ListServices(ctx context.Context, client kubernetes.Interface) (*watch.ClusterState, error) {
	svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Services: %w", err)
	}
	slices, err := client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list EndpointSlices: %w", err)
	}
	cs := &watch.ClusterState{}
	for i := range svcs.Items {
		cs.Services = append(cs.Services, &svcs.Items[i])
	}
	for i := range slices.Items {
		cs.EndpointSlices = append(cs.EndpointSlices, &slices.Items[i])
	}
	return cs, nil
}
