package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
	"github.com/netdrift/netdrift/internal/watch"
)

// stubAPI is a ServicesLister that records the --kubeconfig it was called with.
func stubAPI(cs *watch.ClusterState, err error) (ServicesLister, *[]string) {
	var calls []string
	return func(_ context.Context, kube KubeConfig) (*watch.ClusterState, error) {
		calls = append(calls, *kube.Flags.KubeConfig)
		return cs, err
	}, &calls
}

// kubeFlags parses kubectl's client flags from args.
func kubeFlags(t *testing.T, args ...string) KubeConfig {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	k := AddKubeFlags(fs, ClientFlags())
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestTraceCluster: --cluster files win; the API is asked only with a
// kubeconfig flag, $KUBECONFIG, or inside a pod; an API that fails is an
// error naming what to pass instead.
func TestTraceCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", "")
	api := &watch.ClusterState{}
	list, calls := stubAPI(api, nil)
	if cs, err := traceCluster(list, []string{fixture.Path(t, "cluster.json")}, kubeFlags(t, "--kubeconfig", "/k")); err != nil || len(cs.Services) == 0 || len(*calls) != 0 {
		t.Fatalf("--cluster: %v, %d API calls", err, len(*calls))
	}
	if cs, err := traceCluster(list, nil, kubeFlags(t)); cs != nil || err != nil || len(*calls) != 0 {
		t.Fatalf("nothing to resolve with: %v %v, %d API calls", cs, err, len(*calls))
	}
	if cs, err := traceCluster(list, nil, kubeFlags(t, "--kubeconfig", "/k")); cs != api || err != nil || len(*calls) != 1 || (*calls)[0] != "/k" {
		t.Fatalf("--kubeconfig: %v %v, calls %q", cs, err, *calls)
	}
	if cs, err := traceCluster(list, nil, kubeFlags(t, "--context", "prod")); cs != api || err != nil || len(*calls) != 2 {
		t.Fatalf("--context: %v %v, calls %q", cs, err, *calls)
	}
	t.Setenv("KUBECONFIG", "/from/env")
	if cs, err := traceCluster(list, nil, kubeFlags(t)); cs != api || err != nil || len(*calls) != 3 {
		t.Fatalf("$KUBECONFIG: %v %v, calls %q", cs, err, *calls)
	}
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	if cs, err := traceCluster(list, nil, kubeFlags(t)); cs != api || err != nil || len(*calls) != 4 || (*calls)[3] != "" {
		t.Fatalf("in a pod: %v %v, calls %q", cs, err, *calls)
	}
	list, _ = stubAPI(nil, errors.New("connection refused"))
	if _, err := traceCluster(list, nil, kubeFlags(t, "--kubeconfig", "/k")); err == nil || !strings.Contains(err.Error(), "connection refused") ||
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
	code := run(Env{ServicesFromAPI: list}, []string{"trace-rsts", "--ip", "10.97.230.30", "--kubeconfig", "/k", "--duration", "1s"}, &out, &errb)
	if code != ExitError || out.Len() != 0 || len(*calls) != 1 ||
		!strings.Contains(errb.String(), "Service shop/payments's address, and that Service has no endpoints") {
		t.Fatalf("exit %d, stdout %q, stderr %q, calls %q", code, out.String(), errb.String(), *calls)
	}
}
