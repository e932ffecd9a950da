package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netdrift/netdrift/lab/labenv"
)

// ciliumScenarios run against a lab whose nodes run Cilium's own
// load-balancer control plane (cilium-lb, from github.com/cilium/cilium
// v1.20.2) instead of kube-proxy, writing real service maps per node.
var ciliumScenarios = []scenario{
	{"converged", testCiliumConverged},
	{"graceful", testCiliumGraceful},
	{"fallback", testCiliumTerminatingFallback},
	{"local", testCiliumLocal},
	{"frozen", testCiliumFrozen},
	{"restart", testCiliumRestart},
	{"panels", testCiliumPanels}, // after the stories that feed the panels
}

// TestCiliumScenarios: -run 'TestCiliumScenarios/(frozen|restart)$'.
func TestCiliumScenarios(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, bpf filesystems and maps")
	}
	runScenarios(t, &env{mode: "cilium"}, ciliumScenarios)
}

// testCiliumConverged: a Service with two pods; every agent reports no
// finding for it, and on every node netdrift's reading of the maps is
// Cilium's own (cilium-dbg bpf lb list on the same maps).
func testCiliumConverged(t *testing.T, e *env) {
	l := e.lab
	_, _ = service(t, l, "cconv", []string{"node-2", "node-3"}, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, "default/cconv", 60*time.Second)
	for _, n := range l.Nodes() {
		crossCheck(t, l, n.Name)
	}
	stampDated(t, agents, "default/cconv")
}

// stampDated checks that every agent's lag samples of svc are dated by the
// kernel's stamp of the map writes, not by the read that saw them (the
// stamp needs kernel BTF).
func stampDated(t *testing.T, agents []*Agent, svc string) {
	t.Helper()
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Logf("no kernel BTF (%v): the agents date lag samples by their reads, not checked", err)
		return
	}
	for _, a := range agents {
		var lag Lag
		if err := a.Get(context.Background(), "/v1/lag", &lag); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range lag.Samples {
			if s.Service != svc {
				continue
			}
			n++
			if s.T2Source != "map-write-stamp" {
				var st struct {
					Fallbacks any `json:"fallbacks"`
				}
				_ = a.Get(context.Background(), "/v1/status", &st)
				t.Errorf("%s: %s %s sample has T2 source %q, want map-write-stamp (fallbacks in force: %v)", a.Node, svc, s.Change,
					s.T2Source, st.Fallbacks)
			}
			t.Logf("%s: %s %s: T2-T1 %.3f s (T2 %s)", a.Node, svc, s.Change, s.NodeLagSeconds, s.T2Source)
		}
		if n == 0 {
			t.Errorf("%s: no lag sample of %s", a.Node, svc)
		}
	}
}

// crossCheck compares the ClusterIP frontends and backends netdrift reads
// from node's maps (`netdrift snapshot --bpffs`) with those Cilium's own
// tool decodes from the same maps: cilium-dbg's listing gives every slot's
// backend, its --frontends listing each frontend's count of selectable
// slots (the rest are parked: terminating backends kept for draining).
func crossCheck(t *testing.T, l *labenv.Lab, node string) {
	t.Helper()
	listing, err := l.CiliumLBList(node)
	if err != nil {
		t.Fatal(err)
	}
	masters, err := l.CiliumLBList(node, "--frontends")
	if err != nil {
		t.Fatal(err)
	}
	cilium := ciliumClusterIPs(t, listing, selectableCounts(t, masters))
	bpffs, err := l.NodeBPFFS(node)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := agentBinary()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "snapshot", "--bpffs", bpffs, "-o", "json").Output()
	if err != nil {
		t.Fatalf("netdrift snapshot: %v", err)
	}
	ours := snapshotClusterIPs(t, out)
	if fmt.Sprint(ours) != fmt.Sprint(cilium) {
		t.Errorf("%s: netdrift reads %v\ncilium-dbg lists %v", node, ours, cilium)
	}
	t.Logf("%s: %d ClusterIP frontends agree with cilium-dbg", node, len(ours))
}

// selectableCounts reads `cilium-dbg bpf lb list --frontends -o json`:
// "ip:port" (TCP, external scope) -> count, from each master entry's value
// "backend-id count[qcount] (rev-nat) [flags flags2]".
func selectableCounts(t *testing.T, masters []byte) map[string]int {
	t.Helper()
	var m map[string][]string
	if err := json.Unmarshal(masters, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for k, v := range m {
		fe, ok := strings.CutSuffix(k, "/TCP (0)")
		if !ok || len(v) != 1 {
			continue
		}
		f := strings.Fields(v[0])
		if len(f) < 2 {
			t.Fatalf("--frontends entry %q", v[0])
		}
		n, _, _ := strings.Cut(f[1], "[")
		c, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("--frontends entry %q: %v", v[0], err)
		}
		out[fe] = c
	}
	return out
}

// ciliumClusterIPs: "ip:port" -> sorted backends of the selectable slots
// (1..count), from the listing's ClusterIP frontends (external scope).
func ciliumClusterIPs(t *testing.T, listing []byte, counts map[string]int) map[string][]string {
	t.Helper()
	var m map[string][]string
	if err := json.Unmarshal(listing, &m); err != nil {
		t.Fatal(err)
	}
	clusterIP := map[string]bool{}
	for k, v := range m {
		if strings.HasSuffix(k, "/TCP (0)") && len(v) == 1 && strings.Contains(v[0], "[ClusterIP") {
			clusterIP[strings.TrimSuffix(k, "/TCP (0)")] = true
		}
	}
	out := map[string][]string{}
	for fe := range clusterIP {
		if strings.HasSuffix(fe, ":0") {
			continue // Cilium's wildcard entry
		}
		out[fe] = nil
	}
	for k, v := range m {
		fe, slot, ok := strings.Cut(k, "/TCP (")
		if !ok || !clusterIP[fe] || len(v) != 1 {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(slot, ")"))
		if err != nil || n == 0 || n > counts[fe] {
			continue // the master entry, or a parked slot
		}
		out[fe] = append(out[fe], strings.TrimSuffix(strings.Fields(v[0])[0], "/TCP"))
	}
	for fe := range out {
		sort.Strings(out[fe])
	}
	return out
}

// snapshotClusterIPs reads the same from `netdrift snapshot -o json`.
func snapshotClusterIPs(t *testing.T, out []byte) map[string][]string {
	t.Helper()
	var snap struct {
		Frontends []struct {
			Frontend string   `json:"frontend"`
			Kind     string   `json:"frontend_kind"`
			Protocol string   `json:"protocol"`
			Backends []string `json:"backends"`
		} `json:"frontends"`
	}
	if err := json.Unmarshal(out, &snap); err != nil {
		t.Fatalf("snapshot JSON: %v\n%s", err, out)
	}
	m := map[string][]string{}
	for _, f := range snap.Frontends {
		if f.Kind != "cluster_ip" || f.Protocol != "TCP" {
			continue
		}
		bs := append([]string(nil), f.Backends...)
		sort.Strings(bs)
		m[f.Frontend] = bs
	}
	return m
}

// testCiliumGraceful: a pod with a preStop hook is deleted; while it
// terminates Cilium parks its backend (terminating, never chosen), which
// is not stale: no finding on any node, and the maps agree with cilium-dbg.
func testCiliumGraceful(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	cip, pods := service(t, l, "cgrace", []string{"node-2", "node-3"}, 20*time.Second)
	agents := agentsOf(t, l)
	waitConverged(t, agents, "default/cgrace", 60*time.Second)
	if err := l.DeletePod(ctx, "default", pods[0].Name, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, 250*time.Millisecond, "node-1: Cilium parks the terminating backend", func() (bool, string) {
		n := parkedCount(t, l, "node-1", cip)
		return n == 1, fmt.Sprintf("%d parked slots", n)
	})
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		for _, a := range agents {
			var d Drift
			if err := a.Get(ctx, "/v1/drift", &d); err != nil {
				t.Fatal(err)
			}
			if fs := serviceFindings(d, "default/cgrace"); len(fs) > 0 {
				t.Fatalf("%s: finding during graceful termination: %+v", a.Node, fs)
			}
		}
		time.Sleep(time.Second)
	}
	crossCheck(t, l, "node-1")
}

// testCiliumFrozen: node-1's Cilium control plane is stopped (SIGSTOP)
// while a backend is deleted: node-1's maps keep the backend, its agent
// reports stale_backend within --stale-after of the mismatch, the other
// nodes report nothing; after SIGCONT the finding clears.
func testCiliumFrozen(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	frozen := "node-1"
	_, pods := service(t, l, "cfrz", []string{"node-2", "node-3"}, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, "default/cfrz", 60*time.Second)
	if err := l.FreezeKubeProxy(frozen); err != nil {
		t.Fatal(err)
	}
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_ = l.ThawKubeProxy(frozen)
		}
	})
	victim := pods[0]
	if err := l.DeletePod(ctx, "default", victim.Name, nil); err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		a := a
		if a.Node != frozen {
			waitConverged(t, []*Agent{a}, "default/cfrz", 30*time.Second)
			continue
		}
		eventually(t, 30*time.Second, 200*time.Millisecond, frozen+": stale_backend", func() (bool, string) {
			var d Drift
			if err := a.Get(ctx, "/v1/drift", &d); err != nil {
				return false, err.Error()
			}
			for _, f := range findingsOf(d, "stale_backend", "default/cfrz") {
				if f.Backend == victim.backend() {
					if f.FirstSeen != nil && time.Since(*f.FirstSeen) > staleAfter+2*time.Second {
						return false, "promoted late"
					}
					return true, ""
				}
			}
			return false, "findings " + kinds(d.Findings) + ", pending " + kinds(d.Pending)
		})
	}
	crossCheck(t, l, frozen)
	reported := time.Now()
	forDur, iv := forOf(t, "NetdriftStaleDNAT"), l.ScrapeInterval()
	bound := forDur + 3*iv // two scrapes to see it, one evaluation to act
	fired, firedAt := waitAlert(t, promOf(l), "NetdriftStaleDNAT", bound+30*time.Second, func(as []PromAlert) (bool, string) {
		for _, a := range as {
			if a.Labels["node"] != frozen {
				return false, "fires for another node: " + describe(as)
			}
		}
		return true, ""
	})
	t.Logf("cilium mode: NetdriftStaleDNAT firing %s after the agent reported the finding: %s",
		firedAt.Sub(reported).Round(100*time.Millisecond), describe(fired))
	if took := firedAt.Sub(reported); took > bound+time.Second {
		t.Errorf("NetdriftStaleDNAT fired %s after the finding; want within %s", took, bound)
	}
	if err := l.ThawKubeProxy(frozen); err != nil {
		t.Fatal(err)
	}
	thawed = true
	waitConverged(t, agents, "default/cfrz", 30*time.Second)
	waitResolved(t, promOf(l), "NetdriftStaleDNAT", 3*iv+30*time.Second)
}

// waitResolved waits until alert name is no longer firing.
func waitResolved(t *testing.T, p *Prom, name string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, 500*time.Millisecond, name+" resolved", func() (bool, string) {
		firing := Named(alertsNow(t, p), name, "firing")
		return len(firing) == 0, describe(firing)
	})
}

// testCiliumRestart: node-1's Cilium control plane is stopped and started
// again; the maps stay pinned meanwhile and the restarted control plane
// takes them over. No finding past the restore.
func testCiliumRestart(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	_, _ = service(t, l, "crst", []string{"node-2", "node-3"}, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, "default/crst", 60*time.Second)
	if err := l.StopKubeProxy("node-1"); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := l.StartKubeProxy(sctx, "node-1"); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, agents, "default/crst", 60*time.Second)
	crossCheck(t, l, "node-1")
}

// serviceFindings returns every finding of any kind for svc.
func serviceFindings(d Drift, svc string) []Finding {
	var out []Finding
	for _, f := range d.Findings {
		if f.Service == svc {
			out = append(out, f)
		}
	}
	return out
}

// parkedCount returns the qcount (parked slots) of ip:80/TCP on node from
// `cilium-dbg bpf lb list --frontends -o json` ("id count[qcount] ...").
func parkedCount(t *testing.T, l *labenv.Lab, node, ip string) int {
	t.Helper()
	masters, err := l.CiliumLBList(node, "--frontends")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string][]string
	if err := json.Unmarshal(masters, &m); err != nil {
		t.Fatal(err)
	}
	for _, v := range m[ip+":80/TCP (0)"] {
		if f := strings.Fields(v); len(f) > 1 {
			if _, q, ok := strings.Cut(f[1], "["); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(q, "]"))
				return n
			}
		}
	}
	return 0
}

// testCiliumTerminatingFallback: the only pod of a Service terminates
// (preStop): with no active backend left, Cilium selects the terminating
// one, as kube-proxy's serving-terminating fallback does: no finding.
func testCiliumTerminatingFallback(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	cip, pods := service(t, l, "cfall", []string{"node-2"}, 20*time.Second)
	agents := agentsOf(t, l)
	waitConverged(t, agents, "default/cfall", 60*time.Second)
	if err := l.DeletePod(ctx, "default", pods[0].Name, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the EndpointSlice marks it terminating; Cilium writes it
	for _, n := range l.Nodes() {
		got, err := l.ProgrammedBackends(n.Name, cip, 80)
		if err != nil || len(got) != 1 || got[0] != pods[0].backend() {
			t.Fatalf("%s: Cilium programs %v (%v), want the terminating backend %s selectable", n.Name, got, err, pods[0].backend())
		}
	}
	noFindingsFor(t, agents, "default/cfall", 8*time.Second)
	crossCheck(t, l, "node-1")
}

// testCiliumLocal: internal and external traffic policy Local, the pods on
// node-2 only. node-1 and node-3 have no local endpoint (kube-proxy drops;
// Cilium has no selectable slot), node-2 selects its own pod: no finding
// anywhere.
func testCiliumLocal(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	local := corev1.ServiceInternalTrafficPolicyLocal
	sel := map[string]string{"app": "clocal"}
	svc, err := l.CreateService(ctx, labenv.ServiceSpec{Name: "clocal", Selector: sel, Type: corev1.ServiceTypeNodePort,
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, InternalTrafficPolicy: &local})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAll(l, "clocal") })
	pod := createPod(t, l, "clocal-a1", "node-2", sel, 0)
	eventually(t, 60*time.Second, 250*time.Millisecond, "node-2 programs its local pod", func() (bool, string) {
		got, err := l.ProgrammedBackends("node-2", svc.Spec.ClusterIP, 80)
		return err == nil && equal(got, []string{pod.backend()}), fmt.Sprintf("got %v (%v)", got, err)
	})
	for _, n := range []string{"node-1", "node-3"} {
		if got, err := l.ProgrammedBackends(n, svc.Spec.ClusterIP, 80); err != nil || len(got) != 0 {
			t.Errorf("%s: Cilium programs %v (%v) for an internal-Local service with no local pod", n, got, err)
		}
	}
	agents := agentsOf(t, l)
	waitConverged(t, agents, "default/clocal", 60*time.Second)
	noFindingsFor(t, agents, "default/clocal", 5*time.Second)
	crossCheck(t, l, "node-2")
}

// noFindingsFor asserts that no agent reports any finding for svc during d.
func noFindingsFor(t *testing.T, agents []*Agent, svc string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		for _, a := range agents {
			var dr Drift
			if err := a.Get(context.Background(), "/v1/drift", &dr); err != nil {
				t.Fatal(err)
			}
			if fs := serviceFindings(dr, svc); len(fs) > 0 {
				t.Fatalf("%s: findings for %s: %+v", a.Node, svc, fs)
			}
		}
	}
}
