package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
	"github.com/netdrift/netdrift/internal/watch"
)

// stubAPI is a ServicesLister that records the kubeconfig it was called with.
func stubAPI(cs *watch.ClusterState, err error) (ServicesLister, *[]string) {
	var calls []string
	return func(_ context.Context, kubeconfig string) (*watch.ClusterState, error) {
		calls = append(calls, kubeconfig)
		return cs, err
	}, &calls
}

// TestTraceCluster: --cluster files win; the API is asked only with
// --kubeconfig or inside a pod; an API that fails is an error naming what
// to pass instead.
func TestTraceCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	api := &watch.ClusterState{}
	list, calls := stubAPI(api, nil)
	if cs, err := traceCluster(list, []string{fixture.Path(t, "cluster.json")}, "/k"); err != nil || len(cs.Services) == 0 || len(*calls) != 0 {
		t.Fatalf("--cluster: %v, %d API calls", err, len(*calls))
	}
	if cs, err := traceCluster(list, nil, ""); cs != nil || err != nil || len(*calls) != 0 {
		t.Fatalf("nothing to resolve with: %v %v, %d API calls", cs, err, len(*calls))
	}
	if cs, err := traceCluster(list, nil, "/k"); cs != api || err != nil || len(*calls) != 1 || (*calls)[0] != "/k" {
		t.Fatalf("--kubeconfig: %v %v, calls %q", cs, err, *calls)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	if cs, err := traceCluster(list, nil, ""); cs != api || err != nil || len(*calls) != 2 || (*calls)[1] != "" {
		t.Fatalf("in a pod: %v %v, calls %q", cs, err, *calls)
	}
	list, _ = stubAPI(nil, errors.New("connection refused"))
	if _, err := traceCluster(list, nil, "/k"); err == nil || !strings.Contains(err.Error(), "connection refused") ||
		!strings.Contains(err.Error(), "pass --cluster FILE") {
		t.Fatalf("failing API: %v", err)
	}
}

// TestTraceRSTsResolvesThroughAPI: a VIP the API gives no endpoints is
// refused before the probe loads, as with --cluster.
func TestTraceRSTsResolvesThroughAPI(t *testing.T) {
	cs, err := clusterfile.LoadFiles(fixture.Path(t, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	list, calls := stubAPI(cs, nil)
	var out, errb bytes.Buffer
	code := RunTraceRSTs(list, []string{"--ip", "10.97.230.30", "--kubeconfig", "/k", "--duration", "1s"}, &out, &errb)
	if code != ExitError || out.Len() != 0 || len(*calls) != 1 ||
		!strings.Contains(errb.String(), "Service shop/payments's address, and that Service has no endpoints") {
		t.Fatalf("exit %d, stdout %q, stderr %q, calls %q", code, out.String(), errb.String(), *calls)
	}
}
