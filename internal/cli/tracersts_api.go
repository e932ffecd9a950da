package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/watch"
)

// ServicesLister lists the cluster's Services and EndpointSlices through
// the API with the configuration kube says. The binary provides it (Env;
// the clientset lives in cmd/agent); nil leaves trace-rsts to --cluster.
type ServicesLister func(ctx context.Context, kube KubeConfig) (*watch.ClusterState, error)

// apiTimeout bounds the API lists of trace-rsts.
const apiTimeout = 20 * time.Second

// traceCluster is where trace-rsts resolves Service addresses: the
// --cluster files; else the API when a kubeconfig is chosen (a kubeconfig
// flag, $KUBECONFIG) or the command runs in a pod (in-cluster config);
// else nowhere (nil: addresses are watched as given; ~/.kube/config alone
// is not taken as a wish to ask the API). An API that cannot be read is
// an error saying what to pass instead.
func traceCluster(list ServicesLister, clusters []string, kube KubeConfig) (*watch.ClusterState, error) {
	if len(clusters) > 0 {
		return clusterfile.LoadFiles(clusters...)
	}
	if list == nil || !kube.Explicit() && os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	cs, err := list(ctx, kube)
	if err != nil {
		return nil, fmt.Errorf("reading Services and EndpointSlices to resolve --ip: %w (pass --cluster FILE from `kubectl get services,endpointslices -A -o json` instead)", err)
	}
	return cs, nil
}
