package main

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/netdrift/netdrift/internal/cli"
	"github.com/netdrift/netdrift/internal/watch"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// servicesFromAPI is the CLI's ServicesLister: trace-rsts resolves Service
// addresses with the agent's own client settings (KubeConfig.Load: the
// kubeconfig flags, $KUBECONFIG, in-cluster, ~/.kube/config).
func servicesFromAPI(ctx context.Context, kube cli.KubeConfig) (*watch.ClusterState, error) {
	cfg, err := kube.Load()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return informer.ListServices(ctx, client)
}
