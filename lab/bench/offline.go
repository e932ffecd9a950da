package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// OfflineDiff is `netdrift diff` of a table kube-proxy wrote (in cilium
// mode: cilium-dbg's listing of the maps cilium-lb wrote): the dump a
// responder takes on the node (the run's reference dump) and the cluster
// objects as `kubectl get services,endpointslices,nodes -A -o json` prints
// them, both files read by a fresh process each run.
type OfflineDiff struct {
	Ref          RefDump         // the dump command it is set against
	CPU          []time.Duration // user+system of each run (rusage of the child)
	ClusterBytes int
	DumpBytes    int
}

// Best is the cheapest run (the least disturbed by the shared machine).
func (o OfflineDiff) Best() time.Duration {
	var b time.Duration
	for i, c := range o.CPU {
		if i == 0 || c < b {
			b = c
		}
	}
	return b
}

// Median is the middle run (the lower middle of an even count).
func (o OfflineDiff) Median() time.Duration {
	if len(o.CPU) == 0 {
		return 0
	}
	c := slices.Clone(o.CPU)
	slices.Sort(c)
	return c[(len(c)-1)/2]
}

// offlineDiff writes the dump and the cluster file to a temporary
// directory (cfg.OfflineKeep's, kept, when set) and runs the diff
// cfg.OfflineRuns times. Every run must exit 0
// (no findings) and print no warning: the table is kube-proxy's own, synced.
func offlineDiff(ctx context.Context, cs kubernetes.Interface, cfg Config, ref RefDump) (OfflineDiff, error) {
	od := OfflineDiff{Ref: ref, DumpBytes: len(ref.Out)}
	dir, cleanup, err := offlineDir(cfg)
	if err != nil {
		return od, err
	}
	defer cleanup()
	cluster, err := clusterFile(ctx, cs)
	if err != nil {
		return od, err
	}
	od.ClusterBytes = len(cluster)
	cpath, dpath := filepath.Join(dir, "cluster.json"), filepath.Join(dir, "dump")
	if err := os.WriteFile(cpath, cluster, 0o600); err != nil {
		return od, err
	}
	if err := os.WriteFile(dpath, ref.Out, 0o600); err != nil {
		return od, err
	}
	dumpFlag, allowed := diffInput(cfg.Mode)
	args := []string{"diff", "--node", node, "--cluster", cpath, dumpFlag, dpath}
	for range cfg.OfflineRuns {
		cpu, err := runDiff(ctx, cfg.Agent, args, allowed)
		if err != nil {
			return od, err
		}
		od.CPU = append(od.CPU, cpu)
	}
	return od, nil
}

// offlineDir is where the diff's inputs are written: a temporary
// directory removed afterwards, or OfflineKeep/<mode>-<scale>/, kept for
// profiling.
func offlineDir(cfg Config) (dir string, cleanup func(), err error) {
	if cfg.OfflineKeep == "" {
		dir, err = os.MkdirTemp("", "netdrift-bench-offline-")
		return dir, func() { os.RemoveAll(dir) }, err
	}
	dir = filepath.Join(cfg.OfflineKeep, cfg.Mode+"-"+ScaleName(cfg.Endpoints))
	return dir, func() {}, os.MkdirAll(dir, 0o755)
}

// lbListGap is the warning `netdrift diff --cilium-lb` always prints: the
// listing has no count/qcount, so parked slots cannot be told apart.
const lbListGap = "the lb list does not say which slots are parked"

// diffInput is the diff's flag for the mode's dump and the one warning
// it may print on a synced datapath ("": none).
func diffInput(mode string) (flag, allowed string) {
	switch mode {
	case "nftables":
		return "--nft-json", ""
	case "cilium":
		return "--cilium-lb", lbListGap
	}
	return "--iptables-save", ""
}

// unexpectedWarning is the first "warning:" line of out that does not
// contain allowed ("" when there is none).
func unexpectedWarning(out, allowed string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "warning:") && (allowed == "" || !strings.Contains(line, allowed)) {
			return line
		}
	}
	return ""
}

// runDiff runs one diff; its CPU is the child's own rusage. (Not its
// ru_maxrss: a child started with CLONE_VM starts with its parent's high-water
// mark, the harness's own RSS.) A warning other than allowed fails it.
func runDiff(ctx context.Context, bin string, args []string, allowed string) (time.Duration, error) {
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s %s: %v (it must find nothing on the synced datapath):\n%.2000s%.1000s",
			bin, strings.Join(args, " "), err, out.String(), stderr.String())
	}
	if w := unexpectedWarning(out.String(), allowed); w != "" {
		return 0, fmt.Errorf("netdrift diff warned on the synced datapath (%s):\n%.2000s", w, out.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, fmt.Errorf("%s: no rusage for the child", bin)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// clusterFile lists services, EndpointSlices and nodes and prints them as
// kubectl's `-o json` does: a v1 List whose items carry apiVersion and kind,
// indented by four spaces (the lab module's own copy of what the main
// module's bench.Spec.ClusterFile prints for generated objects).
func clusterFile(ctx context.Context, cs kubernetes.Interface) ([]byte, error) {
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	eps, err := cs.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	items := withKind(nil, svcs.Items, corev1.SchemeGroupVersion.WithKind("Service"))
	items = withKind(items, eps.Items, discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"))
	items = withKind(items, nodes.Items, corev1.SchemeGroupVersion.WithKind("Node"))
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items,
		"metadata": map[string]string{"resourceVersion": ""}}
	return json.MarshalIndent(list, "", "    ")
}

// withKind appends objs to items with their apiVersion and kind set (a
// List from the API leaves them empty in its items) and without managed
// fields, which kubectl's -o json and -o yaml leave out unless
// --show-managed-fields is given (since kubectl v1.21): the file a
// responder captures has none.
func withKind[T any, P interface {
	*T
	runtime.Object
	metav1.Object
}](items []runtime.Object, objs []T, gvk schema.GroupVersionKind) []runtime.Object {
	for i := range objs {
		o := P(&objs[i])
		o.GetObjectKind().SetGroupVersionKind(gvk)
		o.SetManagedFields(nil)
		items = append(items, o)
	}
	return items
}
