package scenarios

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCilium48050 reproduces cilium#48050 (Cilium ≤ 1.19.2, fixed in
// 1.19.3 by cilium#44711): after the API server comes back and the agent
// lists EndpointSlices again, a backend removed meanwhile is not deleted if
// the agent first learnt of it in its initial sync; it stays selectable
// while Cilium considers itself done. v1.19.2 is not served by the Go
// module proxy; v1.19.1 is, and is in the affected range.
//
// Per version, on a fresh cilium lab: a Service with pods on node-2 and
// node-3; node-1's Cilium control plane restarted (its initial sync now
// holds both backends) and frozen; one pod deleted; the API server
// restarted (its watch cache begins anew, so node-1's watch cannot resume
// and lists again); node-1's control plane thawed. v1.19.1 keeps the
// deleted backend in node-1's maps (Cilium's own listing shows it) and
// netdrift reports stale_backend there, past stale-after and for as long as
// the test watches; v1.20.2 removes it and netdrift reports nothing.
func TestCilium48050(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, bpf filesystems and maps")
	}
	for _, v := range []struct {
		name, bin string
		stale     bool
	}{{"v1.19.1", "cilium-lb-1.19.1", true}, {"v1.20.2", "cilium-lb", false}} {
		t.Run(v.name, func(t *testing.T) {
			e := &env{mode: "cilium", name: labName("c" + strings.ReplaceAll(v.name[1:], ".", "")), ciliumLB: v.bin}
			t.Cleanup(func() { e.stop(t) })
			e.get(t)
			defer func() {
				if t.Failed() {
					e.dumpLogs(t)
				}
			}()
			run48050(t, e, v.stale)
		})
	}
}

func run48050(t *testing.T, e *env, wantStale bool) {
	l := e.lab
	ctx := context.Background()
	const node = "node-1"
	cip, pods := service(t, l, "c48050", []string{"node-2", "node-3"}, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, "default/c48050", 60*time.Second)

	// node-1's control plane learns both backends in its initial sync.
	if err := l.StopKubeProxy(node); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := l.StartKubeProxy(sctx, node); err != nil {
		t.Fatal(err)
	}
	waitProgrammed(t, l, cip, backendsOf(pods), 30*time.Second)

	if err := l.FreezeKubeProxy(node); err != nil {
		t.Fatal(err)
	}
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_ = l.ThawKubeProxy(node)
		}
	})
	victim := pods[0]
	if err := l.DeletePod(ctx, "default", victim.Name, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitPodGone(ctx, "default", victim.Name, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-2", "node-3"} { // the other nodes apply the removal at once
		eventually(t, 30*time.Second, 250*time.Millisecond, n+": removal applied", func() (bool, string) {
			got, err := l.ProgrammedBackends(n, cip, 80)
			return err == nil && equal(got, backendsOf(pods[1:])), strings.Join(got, ",")
		})
	}
	if err := l.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := l.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.ThawKubeProxy(node); err != nil {
		t.Fatal(err)
	}
	thawed = true
	a := agent(t, l, node)

	if !wantStale {
		eventually(t, 60*time.Second, 500*time.Millisecond, node+": removal applied after the relist", func() (bool, string) {
			got, err := l.ProgrammedBackends(node, cip, 80)
			return err == nil && equal(got, backendsOf(pods[1:])), strings.Join(got, ",")
		})
		waitConverged(t, []*Agent{a}, "default/c48050", 60*time.Second)
		return
	}
	// The bug: the deleted backend stays in node-1's maps, and netdrift says so.
	eventually(t, 90*time.Second, 500*time.Millisecond, node+": stale_backend for the deleted pod", func() (bool, string) {
		var d Drift
		if err := a.Get(ctx, "/v1/drift", &d); err != nil {
			return false, err.Error()
		}
		for _, f := range findingsOf(d, "stale_backend", "default/c48050") {
			if f.Backend == victim.backend() {
				return true, ""
			}
		}
		return false, "findings " + kinds(d.Findings) + ", pending " + kinds(d.Pending)
	})
	hold := 30 * time.Second
	time.Sleep(hold)
	got, err := l.ProgrammedBackends(node, cip, 80)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(got, victim.backend()) {
		t.Fatalf("%s: Cilium's listing %v no longer holds %s: not the stale state of cilium#48050", node, got, victim.backend())
	}
	var d Drift
	if err := a.Get(ctx, "/v1/drift", &d); err != nil {
		t.Fatal(err)
	}
	if len(findingsOf(d, "stale_backend", "default/c48050")) == 0 {
		t.Fatalf("%s: the stale backend is still programmed but netdrift no longer reports it", node)
	}
	log, _ := os.ReadFile(l.LogPath("kube-proxy/" + node))
	bug := strings.Contains(string(log), "Unexpected failure to delete backends")
	t.Logf("%s: %s still programmed %s after the relist (cilium-dbg: %v); netdrift: stale_backend; cilium-lb logged Cilium's own BUG line: %v",
		node, victim.backend(), hold, got, bug)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
