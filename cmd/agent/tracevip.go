package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netdrift/netdrift/internal/cli"
	"github.com/netdrift/netdrift/internal/watch"
)

// trace-rsts resolves Service addresses through the API with the agent's
// own client settings (restConfig: --kubeconfig, else in-cluster); the CLI
// package takes the function, as client-go lives in this package.
func init() { cli.ServicesFromAPI = servicesFromAPI }

func servicesFromAPI(ctx context.Context, kubeconfig string) (*watch.ClusterState, error) {
	cfg, err := restConfig(kubeconfig, true)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return servicesFromClient(ctx, client)
}

// servicesFromClient lists every Service and EndpointSlice.
func servicesFromClient(ctx context.Context, client kubernetes.Interface) (*watch.ClusterState, error) {
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
