package scenarios

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// cilium#48050 (Cilium <= 1.19.2, fixed in 1.19.3 by cilium#44711 and its
// backport cilium#45198): Cilium's EndpointSlice reflector
// (pkg/loadbalancer/reflectors/k8s.go, runServiceEndpointsReflector) keeps
// the slices it has applied, to release their backends when the watch is
// listed again (a relist: the client-go reflector's Replace, which Cilium
// turns into one Sync event). For slices applied by a Sync it recorded no
// service name, so the next Sync releases their old backends against an
// empty service name (a no-op that raises no error while the backend is
// still in the table), then only upserts the listed ones. A backend that
// left such a slice while the watch was down, and that no watch event
// removed first, stays in Cilium's desired state and maps, and later
// updates of the slice do not remove it either: they compute removals
// against the relisted contents.
//
// The lab's sequence: node-1 runs v1.19.1's control plane (lab/cilium119;
// v1.19.2 is not served by the Go module proxy), node-2 v1.20.2's, node-3
// v1.20.2's as the unfrozen reference. node-1's and node-2's control planes
// are restarted (the Service's slice now comes from their initial list) and
// frozen; the API server is restarted while nothing changes, so their watch
// connections close with no event pending; then a pod is deleted (the
// slice shrinks while they have no watch); thawed, they find their watch
// gone, cannot resume it (the new API server's watch cache begins after
// their resource version: 410 Gone) and list again.
const c48050Svc = "c48050"

// TestCilium48050: make test-lab-cilium-48050.
func TestCilium48050(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, bpf filesystems and maps")
	}
	e := &env{mode: "cilium"}
	t.Cleanup(func() { e.stop(t) })
	start48050(t, e)
	defer func() {
		if t.Failed() {
			e.dumpLogs(t)
		}
	}()
	run48050(t, e.lab)
}

// start48050 brings up a 3-node cilium lab whose node-1 runs v1.19.1's
// cilium-lb.
func start48050(t *testing.T, e *env) {
	bin, err := agentBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := labenv.EnsureBinaries(labenv.DefaultBinDir(), logWriter{t}); err != nil {
		t.Fatal(err)
	}
	name := labName("c48050")
	dir := labenv.DefaultDir(name)
	if left := labenv.Leftovers(name, dir); len(left) > 0 {
		t.Logf("removing what a previous run left of lab %s: %v", name, left)
		if err := labenv.Down(name, dir); err != nil {
			t.Fatalf("cleaning up lab %s: %v", name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e.lab, err = labenv.Start(ctx, labenv.Options{
		Name: name, Dir: dir, Nodes: 3, ProxyMode: "cilium", Agent: bin,
		CiliumLB: map[string]string{"node-1": "cilium-lb-1.19.1"},
		AgentArgs: []string{"--stale-after=" + staleAfter.String(), "--datapath=cilium",
			"--watch-unhealthy-after=" + watchUnhealthyAfter.String()},
		Logf: func(format string, a ...any) { fmt.Printf("lab %s: "+format+"\n", append([]any{name}, a...)...) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := waitAgentsReady(ctx, e.lab); err != nil {
		t.Fatal(err)
	}
}

func run48050(t *testing.T, l *labenv.Lab) {
	svc := "default/" + c48050Svc
	old, fixed := "node-1", "node-2"
	cip, pods := service(t, l, c48050Svc, []string{"node-2", "node-3"}, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, svc, 60*time.Second)
	for _, n := range []string{old, fixed} { // the slice now comes from their initial list
		restartCiliumLB(t, l, n)
	}
	// The maps outlive a restart, so they answer before the restarted
	// control planes have listed: a Service created now, once programmed,
	// shows their watches live (their initial list done).
	_, _ = service(t, l, c48050Svc+"p", []string{"node-3"}, 0)
	waitProgrammed(t, l, cip, backendsOf(pods), 30*time.Second)

	victim, kept := pods[0], pods[1:]
	relistAfterRemoval(t, l, []string{old, fixed}, victim, cip, backendsOf(kept))

	// v1.20.2: the relist removes the backend; netdrift reports nothing.
	programmedOn(t, l, fixed, cip, backendsOf(kept), 60*time.Second)
	waitConverged(t, []*Agent{agent(t, l, fixed)}, svc, 30*time.Second)

	// v1.19.1: the backend stays, Cilium's log says why, netdrift reports it.
	a := agent(t, l, old)
	waitStale(t, a, svc, victim.backend(), 60*time.Second)
	mustHold(t, l, old, cip, victim.backend())
	quietLog(t, l, old)
	laterUpdateKeepsIt(t, l, a, cip, victim, kept)

	// Only a restart of the control plane clears it.
	restartCiliumLB(t, l, old)
	waitConverged(t, []*Agent{a}, svc, 60*time.Second)
}

// restartCiliumLB stops node's control plane and starts it again.
func restartCiliumLB(t *testing.T, l *labenv.Lab, node string) {
	t.Helper()
	if err := l.StopKubeProxy(node); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := l.StartKubeProxy(ctx, node); err != nil {
		t.Fatal(err)
	}
}

// relistAfterRemoval freezes nodes' control planes, restarts the API server
// (their watches close with nothing pending), deletes victim while they
// have no watch, waits until the unfrozen node-3 applied it, and thaws
// them: their watches cannot resume and they list again.
//
// A watch resumes from the last resource version its client saw if the
// API server's watch cache still covers it: a restarted API server's cache
// begins at etcd's revision when it started, so the resume fails (410 Gone)
// only if etcd's revision moved past what the frozen clients saw before
// the new API server started. The old API server's own last write on
// shutdown (the "kubernetes" Service's EndpointSlice) reaches the frozen
// clients' sockets, so nothing written before the stop does that. In a
// cluster the revision moves on while an agent is cut off (other API
// servers, controllers); here one key, outside Kubernetes' prefix, is
// written straight into the lab's etcd while no API server runs.
func relistAfterRemoval(t *testing.T, l *labenv.Lab, nodes []string, victim podInfo, cip string, kept []string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range nodes {
		if err := l.FreezeKubeProxy(n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.ThawKubeProxy(n) })
	}
	if err := l.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	bumpEtcdRevision(t, l)
	if err := l.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.DeletePod(ctx, "default", victim.Name, labenv.Grace(0)); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitPodGone(ctx, "default", victim.Name, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	programmedOn(t, l, "node-3", cip, kept, 60*time.Second)
	for _, n := range nodes {
		if err := l.ThawKubeProxy(n); err != nil {
			t.Fatal(err)
		}
	}
}

// bumpEtcdRevision puts one key into the lab's etcd through its JSON
// gateway (in the router namespace) and returns the new revision.
func bumpEtcdRevision(t *testing.T, l *labenv.Lab) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: labenv.DialContextIn(l.RouterNetNS())}}
	b64 := base64.StdEncoding.EncodeToString
	body := fmt.Sprintf(`{"key":%q,"value":%q}`, b64([]byte("/netdrift-lab/c48050")), b64([]byte(time.Now().String())))
	resp, err := c.Post("http://127.0.0.1:2379/v3/kv/put", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("etcd put: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.Header.Revision == "" {
		t.Fatalf("etcd put: status %s, revision %q, decode error %v", resp.Status, out.Header.Revision, err)
	}
	t.Logf("etcd revision %s written while no API server runs", out.Header.Revision)
	return out.Header.Revision
}

// waitStale waits until a reports stale_backend backend for svc.
func waitStale(t *testing.T, a *Agent, svc, backend string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, 500*time.Millisecond, a.Node+": stale_backend "+backend, func() (bool, string) {
		var d Drift
		if err := a.Get(context.Background(), "/v1/drift", &d); err != nil {
			return false, err.Error()
		}
		for _, f := range findingsOf(d, "stale_backend", svc) {
			if f.Backend == backend {
				return true, ""
			}
		}
		return false, "findings " + kinds(d.Findings) + ", pending " + kinds(d.Pending)
	})
}

// mustHold fails unless Cilium's own listing of node's maps still gives
// backend to cip:80 after a hold well past the relist.
func mustHold(t *testing.T, l *labenv.Lab, node, cip, backend string) {
	t.Helper()
	const hold = 20 * time.Second
	time.Sleep(hold)
	got, err := l.ProgrammedBackends(node, cip, 80)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(got, backend) {
		t.Fatalf("%s: cilium-dbg lists %v for %s: %s is gone, not the stale state of cilium#48050", node, got, cip, backend)
	}
	t.Logf("%s: cilium-dbg still lists %s for %s %s after the relist: %v", node, backend, cip, hold, got)
}

// quietLog fails if node's cilium-lb logged a reflector failure: Cilium's
// own health (the reflector's, which logs each degradation) saw nothing
// wrong while it kept the deleted backend.
func quietLog(t *testing.T, l *labenv.Lab, node string) {
	t.Helper()
	b, err := os.ReadFile(l.LogPath("kube-proxy/" + node))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "Failure processing services") || strings.Contains(line, "BUG:") {
			t.Fatalf("%s: cilium-lb logged a failure: %s", node, line)
		}
	}
	t.Logf("%s: cilium-lb logged no reflector failure", node)
}

// laterUpdateKeepsIt adds a pod on node-3: old's control plane applies the
// addition (a watch update of the same slice) and still keeps victim.
func laterUpdateKeepsIt(t *testing.T, l *labenv.Lab, a *Agent, cip string, victim podInfo, kept []podInfo) {
	t.Helper()
	added := createPod(t, l, c48050Svc+"-b1", "node-3", map[string]string{"app": c48050Svc}, 0)
	want := backendsOf(append(append([]podInfo{}, kept...), added, victim))
	programmedOn(t, l, a.Node, cip, want, 60*time.Second)
	waitStale(t, a, "default/"+c48050Svc, victim.backend(), 30*time.Second)
	t.Logf("%s: after a later update of the slice (%s added), Cilium programs %v and netdrift still reports %s stale", a.Node, added.backend(), want, victim.backend())
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
