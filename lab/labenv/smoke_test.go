package labenv_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/lab/labenv"
)

func TestSmokeIPTables(t *testing.T) { smoke(t, "iptables") }
func TestSmokeNFTables(t *testing.T) { smoke(t, "nftables") }

// startLab brings up a lab for the test and registers a cleanup that tears
// it down and asserts nothing is left (namespaces, processes, directory).
func startLab(t *testing.T, opts labenv.Options) *labenv.Lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, iptables/nft")
	}
	if err := labenv.EnsureBinaries(labenv.DefaultBinDir(), testWriter{t}); err != nil {
		t.Fatal(err)
	}
	opts.Name = fmt.Sprintf("s%d%s", os.Getpid()%1000000, opts.ProxyMode[:1])
	// The default dir ($TMPDIR/netdrift-lab-<name>), so that if this test
	// process is killed, `lab down -name <name>` still finds the state file.
	opts.Dir = labenv.DefaultDir(opts.Name)
	opts.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := labenv.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lab up in %s", l.UpTook())
	pids := l.PIDs()
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, l.Dir())
		}
		if err := l.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if left := labenv.Leftovers(opts.Name, opts.Dir); len(left) > 0 {
			t.Errorf("left over after Stop: %v", left)
		}
		for _, p := range pids {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err == nil && !isZombie(p) {
				t.Errorf("process %d still running after Stop", p)
			}
		}
	})
	return l
}

func smoke(t *testing.T, mode string) {
	l := startLab(t, labenv.Options{Nodes: 2, ProxyMode: mode})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sel := map[string]string{"app": "web"}
	svc, err := l.CreateService(ctx, labenv.ServiceSpec{Name: "web", Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	cip := svc.Spec.ClusterIP
	var want []string
	for i, n := range l.Nodes() {
		name := fmt.Sprintf("web-%d", i+1)
		if _, err := l.CreatePod(ctx, labenv.PodSpec{Name: name, Node: n.Name, Labels: sel}); err != nil {
			t.Fatal(err)
		}
		pod, err := l.WaitPodRunning(ctx, "default", name, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(pod.Status.PodIP, strings.TrimSuffix(n.PodCIDR, "0/24")) {
			t.Errorf("pod %s IP %s not in %s's podCIDR %s", name, pod.Status.PodIP, n.Name, n.PodCIDR)
		}
		want = append(want, fmt.Sprintf("%s:%d", pod.Status.PodIP, labenv.DefaultPodPort))
	}
	for _, n := range l.Nodes() {
		waitBackends(t, l, n.Name, cip, want)
	}
	checkSlice(ctx, t, l, want)
	// A reply through the ClusterIP, from every node.
	for _, n := range l.Nodes() {
		got := get(t, l, n.Name, cip)
		if !strings.HasPrefix(got, "default/web-") {
			t.Errorf("%s: ClusterIP %s answered %q", n.Name, cip, got)
		}
	}
	// Delete web-1: its backend leaves every node's rules.
	if err := l.DeletePod(ctx, "default", "web-1", labenv.Grace(1)); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitPodGone(ctx, "default", "web-1", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Nodes() {
		waitBackends(t, l, n.Name, cip, want[1:])
		if got := get(t, l, n.Name, cip); got != "default/web-2\n" {
			t.Errorf("%s: after deleting web-1 the ClusterIP answered %q", n.Name, got)
		}
	}
}

func waitBackends(t *testing.T, l *labenv.Lab, node, ip string, want []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := l.ProgrammedBackends(node, ip, 80)
		if err == nil && reflect.DeepEqual(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: kube-proxy programmed %v for %s:80 (err %v), want %v", node, got, ip, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(t *testing.T, l *labenv.Lab, node, ip string) string {
	t.Helper()
	c, err := l.HTTPClient(node)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get("http://" + net.JoinHostPort(ip, "80") + "/")
	if err != nil {
		t.Fatalf("%s: GET %s: %v", node, ip, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && (s[i+2] == 'Z' || s[i+2] == 'X')
}

func dumpLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("==== %s (tail)\n%s", filepath.Base(f), b)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// checkSlice asserts kube-controller-manager wrote the Service's
// EndpointSlice with both endpoints and a trigger-time annotation.
func checkSlice(ctx context.Context, t *testing.T, l *labenv.Lab, want []string) {
	t.Helper()
	slices, err := l.Clientset().DiscoveryV1().EndpointSlices("default").List(ctx,
		metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=web"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range slices.Items {
		if s.Annotations["endpoints.kubernetes.io/last-change-trigger-time"] == "" {
			t.Errorf("slice %s has no last-change-trigger-time annotation", s.Name)
		}
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				got = append(got, fmt.Sprintf("%s:%d", a, labenv.DefaultPodPort))
			}
		}
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EndpointSlices hold %v, want %v", got, want)
	}
}
