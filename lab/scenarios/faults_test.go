package scenarios

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/lab/labenv"
)

// The fault scenarios (make test-lab-faults): each asserts no false
// finding (falseFindings), no change without its lag sample (samples
// account for every change, superseded ones included), and recovery.

// rolloutStep replaces pod old of svc by a new pod on the same node: the
// new one is created (an add on every node), then the old one deleted
// (a remove); each waits until every node's kube-proxy programmed it.
func rolloutStep(t *testing.T, l *labenv.Lab, name, cip string, pods []podInfo, i int, newName string) []podInfo {
	t.Helper()
	sel := map[string]string{"app": name}
	p := createPod(t, l, newName, pods[i].Node, sel, 0)
	next := append(append([]podInfo(nil), pods...), p)
	waitProgrammed(t, l, cip, backendsOf(next), 60*time.Second)
	if err := l.DeletePod(context.Background(), "default", pods[i].Name, labenv.Grace(0)); err != nil {
		t.Fatal(err)
	}
	next = append(append([]podInfo(nil), next[:i]...), next[i+1:]...)
	waitProgrammed(t, l, cip, backendsOf(next), 60*time.Second)
	return next
}

// testFaultAgentRestart: the agent on node-1 is killed (SIGKILL) in the
// middle of a rollout and started again before it ends. The other nodes
// measure every change of the rollout; the restarted agent reports no
// finding from its start on, converges, and measures the changes made
// after it is ready; no node reports a false finding.
func testFaultAgentRestart(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	const name, victim = "fagent", "node-1"
	svc := "default/" + name
	cip, pods := service(t, l, name, []string{"node-1", "node-2", "node-3"}, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, svc, 60*time.Second)
	watch := watchFindings(t, l, agents, target{svc, cip, 80})
	began := time.Now()

	pods = rolloutStep(t, l, name, cip, pods, 0, name+"-b1")
	if err := l.KillAgent(victim); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_, _ = l.StartAgent(victim)
		}
	})
	pods = rolloutStep(t, l, name, cip, pods, 0, name+"-b2") // while the agent is down
	if _, err := l.StartAgent(victim); err != nil {
		t.Fatal(err)
	}
	restarted = true
	if err := waitAgentsReady(ctx, l); err != nil {
		t.Fatal(err)
	}
	readyAt := time.Now()
	var byNode = map[string]*Agent{}
	for _, a := range agents {
		byNode[a.Node] = a
	}
	noFindingFor(t, byNode[victim], staleAfter+time.Second, "just restarted, nothing changing")
	// Its initial list is no delivery of a change: the trigger times it
	// carries date changes made before the start, no watch delay.
	sliceDelays := map[string]string{"source": "endpointslice"}
	if n := metricOf(t, byNode[victim], "netdrift_watch_delay_seconds_count", sliceDelays); n != 0 {
		t.Errorf("%s: %v EndpointSlice watch delays observed from its initial list", victim, n)
	}
	pods = rolloutStep(t, l, name, cip, pods, 0, name+"-b3") // after the restart
	waitConverged(t, agents, svc, 30*time.Second)
	watch.check(t)

	for _, a := range agents {
		if a.Node == victim {
			// The changes made while it was down are its initial list, not
			// changes; the one step after its start is two changes.
			s := waitChangesMeasured(t, a, svc, readyAt, 2, 30*time.Second)
			t.Logf("%s (restarted): %s", a.Node, describeSamples(s))
			continue
		}
		s := waitChangesMeasured(t, a, svc, began, 6, 30*time.Second)
		t.Logf("%s: the 3-step rollout's 6 changes measured: %s", a.Node, describeSamples(s))
	}
	n := metricOf(t, byNode[victim], "netdrift_watch_delay_seconds_count", sliceDelays)
	sum := metricOf(t, byNode[victim], "netdrift_watch_delay_seconds_sum", sliceDelays)
	if n == 0 || sum/n > 10 {
		t.Errorf("%s: %v EndpointSlice watch delays, mean %.3fs, after a rollout step: want some, of seconds at most", victim, n, sum/n)
	}
	var st Status
	if err := byNode[victim].Get(ctx, "/v1/status", &st); err != nil {
		t.Fatal(err)
	}
	if !st.Ready || st.Findings != 0 || st.PendingChanges != 0 {
		t.Errorf("%s after the restart: ready %v findings %d pending changes %d", victim, st.Ready, st.Findings, st.PendingChanges)
	}
	_ = pods
}

// testFaultKubeProxyRestart: kube-proxy on node-2 is stopped and started
// again: it rewrites every rule of its datapath. No node reports a finding
// (a mismatch, if any, is younger than --stale-after), no change is
// recorded (nothing changed), and a change made after the restart is
// measured with a lag of seconds at most on the restarted node.
func testFaultKubeProxyRestart(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	const name, node = "fkp", "node-2"
	svc := "default/" + name
	cip, pods := service(t, l, name, []string{"node-1", "node-3"}, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, svc, 60*time.Second)
	watch := watchFindings(t, l, agents, target{svc, cip, 80})
	began := time.Now()
	var samplesBefore = map[string]float64{}
	for _, a := range agents {
		samplesBefore[a.Node] = metricOf(t, a, "netdrift_node_programming_lag_seconds_count", nil)
	}
	if err := l.StopKubeProxy(node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.StartKubeProxy(context.Background(), node) })
	time.Sleep(2 * time.Second)
	startAt := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := l.StartKubeProxy(sctx, node); err != nil {
		t.Fatal(err)
	}
	synced := waitKubeProxySync(t, l, node, startAt)
	t.Logf("kube-proxy on %s restarted: its first sync completed %s after the start", node, synced.Sub(startAt).Round(time.Millisecond))
	// Past --stale-after and an audit of every node.
	time.Sleep(staleAfter + 2*time.Second)
	for _, a := range agents {
		if n := metricOf(t, a, "netdrift_node_programming_lag_seconds_count", nil); n != samplesBefore[a.Node] {
			t.Errorf("%s: %v lag samples recorded across a kube-proxy restart that changed nothing", a.Node, n-samplesBefore[a.Node])
		}
		if _, pend, err := lagSince(ctx, a, svc, began); err != nil || len(pend) > 0 {
			t.Errorf("%s: pending changes %v (%v) across a kube-proxy restart", a.Node, pend, err)
		}
	}
	// A change after the restart is measured on the restarted node.
	changed := time.Now()
	p := createPod(t, l, name+"-a3", "node-3", map[string]string{"app": name}, 0)
	waitProgrammed(t, l, cip, backendsOf(append(pods, p)), 60*time.Second)
	waitConverged(t, agents, svc, 30*time.Second)
	watch.check(t)
	for _, a := range agents {
		s := waitChangesMeasured(t, a, svc, changed, 1, 30*time.Second)
		if a.Node == node && (s[len(s)-1].NodeLagSeconds < 0 || s[len(s)-1].NodeLagSeconds > 5) {
			t.Errorf("%s: lag %.3fs for a change after the kube-proxy restart: want 0-5 s", a.Node, s[len(s)-1].NodeLagSeconds)
		}
	}
}

// testFaultAPIServerRestart: while another Service's backends come and go
// (churn), the API server is stopped right after a backend is deleted (the
// delete may reach the slice controller before the stop, or only after the
// return) and started 10 s later. No false finding on any node during or
// after; every node measures the removal and the change made after the
// return, converges on the churned Service, and has nothing left pending.
func testFaultAPIServerRestart(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	const name = "fapi"
	svc := "default/" + name
	var nodes []string // all three, or two after nodegone
	for _, n := range l.Nodes() {
		nodes = append(nodes, n.Name)
	}
	cip, pods := service(t, l, name, nodes, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, svc, 60*time.Second)
	// The API server removes its own endpoint from the kubernetes Service
	// when it stops and adds it back after its start: a change of that
	// Service too, which kube-proxy may program late (its informers back
	// off), a stale state netdrift must report while it lasts.
	kube, err := l.Clientset().CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Churn on a second Service, before, during and after the outage.
	const churned = "fchurn"
	ccip, cpods := service(t, l, churned, nodes[1:2], 0)
	waitConverged(t, agents, "default/"+churned, 60*time.Second)
	watch := watchFindings(t, l, agents, target{svc, cip, 80}, target{"default/kubernetes", kube.Spec.ClusterIP, 443},
		target{"default/" + churned, ccip, 80})
	ch := startChurn(l, churned, nodes[len(nodes)-1])
	time.Sleep(3 * time.Second)
	began := time.Now()
	if err := l.DeletePod(ctx, "default", pods[0].Name, labenv.Grace(0)); err != nil {
		t.Fatal(err)
	}
	if err := l.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = l.StartAPIServer(context.Background())
		}
	})
	time.Sleep(10 * time.Second)
	if err := l.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	t.Logf("API server down %s", time.Since(began).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	done, errs := ch.end(t, l, churned)
	t.Logf("churn: %d pods came and went, %d calls failed", done, errs)
	waitProgrammed(t, l, ccip, backendsOf(cpods), 150*time.Second)
	left := pods[1:]
	// kube-proxy's and the controller manager's informers may back off
	// after the outage: allow them the time kubeProxyCatchUp allows.
	waitProgrammed(t, l, cip, backendsOf(left), 150*time.Second)
	for _, a := range agents {
		waitChangesMeasured(t, a, svc, began, 1, 60*time.Second)
	}
	after := time.Now()
	p := createPod(t, l, name+"-new", nodes[0], map[string]string{"app": name}, 0)
	waitProgrammed(t, l, cip, backendsOf(append(left, p)), 150*time.Second)
	waitConverged(t, agents, svc, 60*time.Second)
	waitConverged(t, agents, "default/"+churned, 60*time.Second)
	for _, a := range agents {
		eventually(t, 120*time.Second, 500*time.Millisecond, a.Node+": no finding once kube-proxy caught up", func() (bool, string) {
			var d Drift
			if err := a.Get(ctx, "/v1/drift", &d); err != nil {
				return false, err.Error()
			}
			return len(d.Findings) == 0, "findings " + kinds(d.Findings)
		})
	}
	watch.check(t)
	for _, a := range agents {
		s := waitChangesMeasured(t, a, svc, after, 1, 30*time.Second)
		t.Logf("%s: change after the return measured: %s", a.Node, describeSamples(s))
		var st Status
		if err := a.Get(ctx, "/v1/status", &st); err != nil {
			t.Fatal(err)
		}
		if !st.Ready || !st.Watch.Healthy || st.Findings != 0 {
			t.Errorf("%s after the API server's return: ready %v watch healthy %v findings %d (%s)", a.Node, st.Ready, st.Watch.Healthy, st.Findings, st.Watch.Reason)
		}
	}
}

// testFaultRuleDeleted: one KUBE-SEP DNAT rule (iptables mode) or the
// service chain's DNAT rule (nftables mode) is deleted by hand on node-3, behind
// kube-proxy's back. node-3's agent reports it within --stale-after plus
// a Lease period (a watch delivery proving its view current), keeps
// reporting it while the rule stays deleted, and
// clears it once kube-proxy has written it again (a restart rewrites every
// rule). The other nodes report nothing.
func testFaultRuleDeleted(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	const name, node = "frule", "node-3"
	svc := "default/" + name
	_, pods := service(t, l, name, []string{"node-1", "node-2"}, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, svc, 60*time.Second)
	var target *Agent
	for _, a := range agents {
		if a.Node == node {
			target = a
		}
	}
	victim := pods[0].backend()
	deleted, err := deleteDNAT(l, node, victim)
	if err != nil {
		t.Fatal(err)
	}
	deletedAt := time.Now()
	t.Logf("%s: deleted %s", node, deleted)
	t.Cleanup(func() { _ = l.StartKubeProxy(context.Background(), node) })
	// In nftables mode the deleted rule DNATs to every backend: a finding
	// may name the frontend only.
	about := func(f Finding) bool { return f.Service == svc && (f.Backend == victim || f.Backend == "") }
	// Nothing in the cluster changed: the mismatch is promoted once a watch
	// delivery after it proves the agent's view current (the next Lease
	// renewal) and it is --stale-after old.
	within := staleAfter + leasePeriod + 3*time.Second
	var found Finding
	eventually(t, within, 200*time.Millisecond, node+": a finding for the deleted DNAT of "+victim, func() (bool, string) {
		var d Drift
		if err := target.Get(ctx, "/v1/drift", &d); err != nil {
			return false, err.Error()
		}
		for _, f := range d.Findings {
			if about(f) {
				found = f
				return true, ""
			}
		}
		return false, "findings " + kinds(d.Findings) + ", pending " + kinds(d.Pending)
	})
	first := "unknown"
	if found.FirstSeen != nil {
		first = found.FirstSeen.Sub(deletedAt).Round(time.Millisecond).String()
	}
	t.Logf("%s: %s %s reported %s after the delete (mismatch first seen %s after it): %s", node, found.Kind, found.Backend,
		time.Since(deletedAt).Round(time.Millisecond), first, found.Detail)
	// Still reported while the rule stays deleted (kube-proxy, unaware,
	// rewrites nothing of an unchanged Service), and only on node.
	for end := time.Now().Add(2 * auditInterval); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		back := dnatPresent(t, l, node, victim)
		var d Drift
		if err := target.Get(ctx, "/v1/drift", &d); err != nil {
			t.Fatal(err)
		}
		reported := false
		for _, f := range d.Findings {
			reported = reported || about(f)
		}
		if back {
			t.Logf("%s: kube-proxy wrote the DNAT of %s again %s after the delete", node, victim, time.Since(deletedAt).Round(time.Second))
			break
		}
		if !reported {
			t.Fatalf("%s: the finding disappeared while the DNAT of %s is still deleted: findings %s", node, victim, kinds(d.Findings))
		}
	}
	for _, a := range agents {
		if a.Node != node {
			noFindingFor(t, a, 0, "the rule was deleted on "+node+" only")
		}
	}
	// A kube-proxy restart rewrites every rule: the finding clears.
	if err := l.StopKubeProxy(node); err != nil {
		t.Fatal(err)
	}
	startAt := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := l.StartKubeProxy(sctx, node); err != nil {
		t.Fatal(err)
	}
	waitKubeProxySync(t, l, node, startAt)
	if !dnatPresent(t, l, node, victim) {
		t.Fatalf("%s: kube-proxy restarted and synced but the DNAT of %s is still missing", node, victim)
	}
	cleared := eventually(t, staleAfter+auditInterval+3*time.Second, 200*time.Millisecond, node+": finding cleared", func() (bool, string) {
		var d Drift
		if err := target.Get(ctx, "/v1/drift", &d); err != nil {
			return false, err.Error()
		}
		fs := append(findingsOf(d, "", svc), d.Pending...)
		return len(fs) == 0, "findings/mismatches " + kinds(fs)
	})
	t.Logf("%s: finding cleared %s after kube-proxy rewrote the rules", node, cleared.Round(time.Millisecond))
}

// auditInterval is the agents' --audit-interval (the default: the lab
// does not set it); leasePeriod the lab's Lease renewal period (labenv's
// default).
const auditInterval, leasePeriod = 10 * time.Second, 10 * time.Second

// deleteDNAT deletes the rule that DNATs to backend in node's kube-proxy
// rules and returns it as listed.
func deleteDNAT(l *labenv.Lab, node, backend string) (string, error) {
	if l.ProxyMode() == "nftables" {
		chain, handle, rule, err := nftDNATRule(l, node, backend)
		if err != nil {
			return "", err
		}
		if out, err := l.Exec(node, "nft", "delete", "rule", "ip", "kube-proxy", chain, "handle", handle); err != nil {
			return "", fmt.Errorf("nft delete rule: %v: %s", err, out)
		}
		return chain + ": " + rule, nil
	}
	chain, num, rule, err := iptDNATRule(l, node, backend)
	if err != nil {
		return "", err
	}
	if out, err := l.Exec(node, "iptables", "-t", "nat", "-D", chain, fmt.Sprint(num)); err != nil {
		return "", fmt.Errorf("iptables -D %s %d: %v: %s", chain, num, err, out)
	}
	return rule, nil
}

// iptDNATRule finds the KUBE-SEP chain's DNAT rule to backend: its chain,
// its number in the chain (1-based) and its text.
func iptDNATRule(l *labenv.Lab, node, backend string) (string, int, string, error) {
	out, err := l.Exec(node, "iptables", "-t", "nat", "-S")
	if err != nil {
		return "", 0, "", fmt.Errorf("iptables -S: %v: %s", err, out)
	}
	nums := map[string]int{}
	for _, ln := range strings.Split(string(out), "\n") {
		f := strings.Fields(ln)
		if len(f) < 2 || f[0] != "-A" {
			continue
		}
		nums[f[1]]++
		if strings.HasPrefix(f[1], "KUBE-SEP-") && strings.Contains(ln, "-j DNAT") && strings.Contains(ln, "--to-destination "+backend) {
			return f[1], nums[f[1]], ln, nil
		}
	}
	return "", 0, "", fmt.Errorf("%s: no KUBE-SEP DNAT rule to %s", node, backend)
}

// nftDNATRule finds the DNAT rule to backend in the kube-proxy table (the
// service chain's, whose numgen map DNATs to every backend, in current
// kube-proxy versions): its chain, handle and text.
func nftDNATRule(l *labenv.Lab, node, backend string) (string, string, string, error) {
	out, err := l.Exec(node, "nft", "-a", "list", "table", "ip", "kube-proxy")
	if err != nil {
		return "", "", "", fmt.Errorf("nft list: %v: %s", err, out)
	}
	chain := ""
	for _, ln := range strings.Split(string(out), "\n") {
		ln = strings.TrimSpace(ln)
		if strings.HasPrefix(ln, "chain ") {
			chain = strings.Fields(ln)[1]
			continue
		}
		// an endpoint chain's "dnat to IP:PORT", or the service chain's
		// "dnat to numgen random mod N map { 0 : IP . PORT, ... }"
		if strings.Contains(ln, "dnat ") && (strings.Contains(ln, " "+backend) || strings.Contains(ln, " "+strings.Replace(backend, ":", " . ", 1))) {
			if i := strings.Index(ln, "# handle "); i >= 0 {
				return chain, strings.TrimSpace(ln[i+len("# handle "):]), ln, nil
			}
		}
	}
	return "", "", "", fmt.Errorf("%s: no kube-proxy DNAT rule to %s", node, backend)
}

// dnatPresent reports whether node's kube-proxy rules DNAT to backend.
func dnatPresent(t *testing.T, l *labenv.Lab, node, backend string) bool {
	t.Helper()
	var err error
	if l.ProxyMode() == "nftables" {
		_, _, _, err = nftDNATRule(l, node, backend)
	} else {
		_, _, _, err = iptDNATRule(l, node, backend)
	}
	return err == nil
}
