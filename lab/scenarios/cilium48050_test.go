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
// connections close with no event pending (one key is written into etcd
// meanwhile, see removeWhileCut); then a pod is deleted (the slice shrinks
// while they have no watch); thawed, they find their watch gone, cannot
// resume it (the new API server's watch cache begins after their resource
// version: 410 Gone) and list again. A second Service, created after the
// restart so they learn its slice from a watch event, loses a pod the same
// way: the control, removed by both versions in the same relist.
const c48050Svc = "c48050"

// TestCilium48050: make test-lab-cilium-48050 (and make test-lab-cilium, in make test).
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
	listed := newSvc48050(t, l, c48050Svc)
	// Restarted, they learn listed's slice from their initial list.
	restartedAfterRemoval(t, l, []string{old, fixed}, newSvc48050(t, l, c48050Svc+"r"))
	// A slice they learn from a watch event, not a list: the control.
	watched := newSvc48050(t, l, c48050Svc+"w")

	a := agent(t, l, old)
	victim := listed.pods[0]
	removed := removeWhileCut(t, l, []string{old, fixed}, listed, watched)
	found := waitPromoted(t, a, svc, victim.backend(), removed)
	thaw(t, l, []string{old, fixed})

	// v1.20.2: the relist removes both backends; netdrift reports nothing.
	for _, s := range []svc48050{listed, watched} {
		programmedOn(t, l, fixed, s.cip, backendsOf(s.kept()), 60*time.Second)
		waitConverged(t, []*Agent{agent(t, l, fixed)}, "default/"+s.name, 30*time.Second)
	}
	t.Logf("%s (v1.20.2): both removals applied after the relist, no finding", fixed)

	// v1.19.1: the same relist removes the backend of the slice it learnt
	// from a watch event, and keeps that of the slice it learnt from its
	// initial list; Cilium's log says nothing; netdrift's finding stays.
	programmedOn(t, l, old, watched.cip, backendsOf(watched.kept()), 60*time.Second)
	waitConverged(t, []*Agent{a}, "default/"+watched.name, 30*time.Second)
	mustHold(t, l, old, listed.cip, victim.backend())
	quietLog(t, l, old)
	if f := waitStale(t, a, svc, victim.backend(), time.Second); !f.FirstSeen.Equal(*found.FirstSeen) {
		t.Fatalf("%s: stale_backend %s first seen %v, then %v: not one continuous finding", old, victim.backend(), found.FirstSeen, f.FirstSeen)
	}
	laterUpdateKeepsIt(t, l, a, listed.cip, victim, listed.kept())

	// Only a restart of the control plane clears it.
	restartCiliumLB(t, l, old)
	waitConverged(t, []*Agent{a}, svc, 60*time.Second)
}

// svc48050 is a Service with a pod on node-2 (the one deleted) and one on
// node-3.
type svc48050 struct {
	name, cip string
	pods      []podInfo
}

func (s svc48050) kept() []podInfo { return s.pods[1:] }

func newSvc48050(t *testing.T, l *labenv.Lab, name string) svc48050 {
	cip, pods := service(t, l, name, []string{"node-2", "node-3"}, 0)
	waitConverged(t, agentsOf(t, l), "default/"+name, 60*time.Second)
	return svc48050{name: name, cip: cip, pods: pods}
}

// restartedAfterRemoval stops nodes' control planes, deletes probe's first
// pod, and starts them again. The maps outlive a restart and answer at
// once; the deleted backend leaves them only once a restarted control
// plane has applied its initial list of EndpointSlices, so its removal
// from every node's maps shows their initial lists done.
func restartedAfterRemoval(t *testing.T, l *labenv.Lab, nodes []string, probe svc48050) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := l.StopKubeProxy(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.DeletePod(ctx, "default", probe.pods[0].Name, labenv.Grace(0)); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitPodGone(ctx, "default", probe.pods[0].Name, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := l.StartKubeProxy(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	waitProgrammed(t, l, probe.cip, backendsOf(probe.kept()), 60*time.Second)
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

// removeWhileCut freezes nodes' control planes, restarts the API server
// (their watches close with nothing pending), deletes each Service's first
// pod while they have no watch, and waits until the unfrozen node-3 applied
// that. It returns when the deletions began.
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
func removeWhileCut(t *testing.T, l *labenv.Lab, nodes []string, svcs ...svc48050) (removed time.Time) {
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
	removed = time.Now()
	for _, s := range svcs {
		victim := s.pods[0]
		if err := l.DeletePod(ctx, "default", victim.Name, labenv.Grace(0)); err != nil {
			t.Fatal(err)
		}
		if err := l.WaitPodGone(ctx, "default", victim.Name, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		programmedOn(t, l, "node-3", s.cip, backendsOf(s.kept()), 60*time.Second)
	}
	return removed
}

// thaw resumes nodes' control planes: they find their watches closed,
// cannot resume them and list again.
func thaw(t *testing.T, l *labenv.Lab, nodes []string) {
	t.Helper()
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

// waitStale waits until a reports stale_backend backend for svc and returns
// the finding.
func waitStale(t *testing.T, a *Agent, svc, backend string, timeout time.Duration) Finding {
	t.Helper()
	var found Finding
	eventually(t, timeout, 200*time.Millisecond, a.Node+": stale_backend "+backend, func() (bool, string) {
		var d Drift
		if err := a.Get(context.Background(), "/v1/drift", &d); err != nil {
			return false, err.Error()
		}
		for _, f := range findingsOf(d, "stale_backend", svc) {
			if f.Backend == backend {
				found = f
				return true, ""
			}
		}
		return false, "findings " + kinds(d.Findings) + ", pending " + kinds(d.Pending)
	})
	return found
}

// waitPromoted waits for the stale_backend finding of a backend removed at
// removed, and checks that netdrift saw the mismatch after the removal and
// reported it within stale-after of seeing it.
func waitPromoted(t *testing.T, a *Agent, svc, backend string, removed time.Time) Finding {
	t.Helper()
	f := waitStale(t, a, svc, backend, 30*time.Second)
	if f.FirstSeen == nil || f.FirstSeen.Before(removed.Add(-time.Second)) {
		t.Fatalf("%s: stale_backend %s first seen %v, the removal at %v", a.Node, backend, f.FirstSeen, removed)
	}
	late := time.Since(*f.FirstSeen)
	// stale-after, then the next audit that promotes it and this test's
	// poll: 4 s of slack for a loaded machine (2.4 s seen once under CI-like load).
	if late > staleAfter+4*time.Second {
		t.Fatalf("%s: stale_backend %s reported %s after its mismatch was first seen (stale-after %s)", a.Node, backend, late, staleAfter)
	}
	t.Logf("%s: stale_backend %s: mismatch seen %s after the removal, reported by %s after that (stale-after %s)",
		a.Node, backend, f.FirstSeen.Sub(removed).Round(time.Millisecond), late.Round(time.Millisecond), staleAfter)
	return f
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
