package clustercmd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/netdrift/netdrift/internal/report"
)

var nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// load lists the nodes (names only: a metadata LIST, with the label
// selector) and every NodeReport, both from the API server's watch cache
// (resourceVersion "0"), and returns the Input.
func load(ctx context.Context, cfg *rest.Config, selector, pluginVersion string) (Input, error) {
	in := Input{PluginVersion: pluginVersion}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return in, err
	}
	nodes, err := mc.Resource(nodesGVR).List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
	if err != nil {
		return in, listError(err, "nodes", "nodes")
	}
	for _, n := range nodes.Items {
		in.Nodes = append(in.Nodes, n.Name)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return in, err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/apis", report.Group, report.Version, report.Resource).
		Param("resourceVersion", "0").DoRaw(ctx)
	if err != nil {
		return in, listError(err, "NodeReports", report.Resource+"."+report.Group)
	}
	var list report.NodeReportList
	if err := json.Unmarshal(raw, &list); err != nil {
		return in, fmt.Errorf("decode the NodeReport list: %w", err)
	}
	in.Reports, in.Now = list.Items, time.Now()
	return in, nil
}

func listError(err error, what, resource string) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not list %s: the cluster commands need RBAC verb list on nodes and on %s.%s (cluster-scoped: a ClusterRole; docs/install.md): %w",
			what, report.Resource, report.Group, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("this cluster serves no %s: install the NodeReport CustomResourceDefinition (deploy/crds) and agents that publish reports: %w", resource, err)
	}
	return fmt.Errorf("list %s: %w", what, err)
}
