package scenarios

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/lab/labenv"
)

// staleAfter is the agents' --stale-after in the scenario labs.
const staleAfter = 3 * time.Second

// watchUnhealthyAfter is the agents' --watch-unhealthy-after: two Lease
// periods (10 s), so a 30 s API server outage is noticed on every node.
const watchUnhealthyAfter = 20 * time.Second

// scenario is one end-to-end check run against a mode's shared lab.
type scenario struct {
	name string
	run  func(t *testing.T, e *env)
}

// scenarios run in this order (nodegone deletes node-3: the apiserver
// scenario runs on the two nodes left).
var scenarios = []scenario{
	{"lagprecision", testLagPrecision}, // first: kube-proxy's post-commit work (conntrack cleanup) grows with the traffic of later scenarios
	{"quiet", testQuiet},               // before any scenario that rightly fires an alert (rollout: RSTs for 5 minutes)
	{"docs", testDocs},                 // before the scenarios that create the chart's objects without Helm
	{"rollout", testRollout},
	{"prestop", testPreStop},
	{"readyrefusals", testReadyRefusals},
	{"slowalerts", testSlowAlerts}, // its own target: make test-lab-alerts (right after readyrefusals: its refusals)
	{"rollout10", testRollout10},   // its own target: make test-lab-rollout10
	{"frozen", testFrozen},
	{"stalealert", testStaleDNATAlert},
	{"nodereports", testNodeReports},
	{"reportpolicy", testReportPolicy},
	{"panels", testPanels}, // after the stories that feed the panels
	{"readonly", testReadOnly},
	// the faults (make test-lab-faults): before nodegone, which leaves two
	// nodes, and before the outages, whose back-off slows what follows
	{"agentrestart", testFaultAgentRestart},
	{"kprestart", testFaultKubeProxyRestart},
	{"ruledeleted", testFaultRuleDeleted},
	{"triggerskew", testFaultTriggerSkew},
	{"plugin", testPlugin}, // kubectl-netdrift through the API server and nodestream (before nodegone: all three nodes)
	{"nodegone", testNodeGone},
	// last: after the outage kube-proxy's and the controller manager's own
	// informers back off for up to a minute, which would slow later scenarios.
	{"apirestart", testFaultAPIServerRestart}, // a 10 s outage: before the 30 s one
	{"apiserver", testAPIServerDown},
	{"watchalert", testWatchAlert},
}

// TestScenarios runs every scenario per kube-proxy mode, sharing one
// 3-node lab per mode: -run 'TestScenarios/iptables/(rollout|frozen)$'.
func TestScenarios(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, iptables/nft, eBPF")
	}
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) {
			runScenarios(t, &env{mode: mode}, scenarios)
		})
	}
}

// runScenarios runs each scenario as a subtest against e's lab, started
// by the first that needs it and stopped when t ends.
func runScenarios(t *testing.T, e *env, list []scenario) {
	t.Cleanup(func() { e.stop(t) })
	for _, sc := range list {
		t.Run(sc.name, func(t *testing.T) {
			e.get(t)
			defer func() {
				if t.Failed() {
					e.dumpLogs(t)
				}
			}()
			sc.run(t, e)
		})
	}
}

// env is a mode's lab, started by the first scenario that needs it.
type env struct {
	mode    string
	lab     *labenv.Lab
	err     error
	started time.Time // when the lab came up
	// removal lag measured by the rollout scenario (max over nodes).
	removalLag time.Duration
	preStop    time.Duration // what the agents recommend
	mu         sync.Mutex
}

// labName is the lab of a mode; NETDRIFT_LAB_PREFIX (default "sc") keeps
// concurrent runs of several checkouts apart.
func labName(mode string) string {
	prefix := os.Getenv("NETDRIFT_LAB_PREFIX")
	if prefix == "" {
		prefix = "sc"
	}
	return prefix + mode[:3]
}

func agentBinary() (string, error) {
	p := os.Getenv("NETDRIFT_BIN")
	if p == "" {
		p = filepath.Join(labenv.ModuleDir(), "..", "bin", "netdrift")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("netdrift binary %s: %w (run `make build`, or set NETDRIFT_BIN)", abs, err)
	}
	return abs, nil
}

func (e *env) get(t *testing.T) *labenv.Lab {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lab == nil && e.err == nil {
		e.lab, e.err = e.start(t)
	}
	if e.err != nil {
		t.Fatalf("lab (%s): %v", e.mode, e.err)
	}
	return e.lab
}

func (e *env) start(t *testing.T) (*labenv.Lab, error) {
	bin, err := agentBinary()
	if err != nil {
		return nil, err
	}
	if err := labenv.EnsureBinaries(labenv.DefaultBinDir(), logWriter{t}); err != nil {
		return nil, err
	}
	name := labName(e.mode)
	dir := labenv.DefaultDir(name)
	if left := labenv.Leftovers(name, dir); len(left) > 0 {
		t.Logf("removing what a previous run left of lab %s: %v", name, left)
		if err := labenv.Down(name, dir); err != nil {
			return nil, fmt.Errorf("cleaning up lab %s: %w", name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := labenv.Start(ctx, labenv.Options{
		Name: name, Dir: dir, Nodes: 3, ProxyMode: e.mode, Agent: bin, Prometheus: true,
		AgentArgs: append([]string{"--stale-after=" + staleAfter.String(), "--datapath=" + e.mode,
			"--watch-unhealthy-after=" + watchUnhealthyAfter.String(), "--node-report-heartbeat=20s", "--node-report-min-interval=2s", "--node-condition", "--node-events"}, strings.Fields(os.Getenv("NETDRIFT_LAB_AGENT_ARGS"))...),
		Logf: func(format string, a ...any) { fmt.Printf("lab %s: "+format+"\n", append([]any{name}, a...)...) },
	})
	if err != nil {
		return nil, err
	}
	e.started = time.Now()
	t.Logf("lab %s up in %s; prometheus %s (scrape and rule evaluation every %s)", name, l.UpTook().Round(time.Millisecond), l.PrometheusURL(), l.ScrapeInterval())
	if err := waitAgentsReady(ctx, l); err != nil {
		e.lab = l
		return nil, err
	}
	return l, nil
}

func (e *env) stop(t *testing.T) {
	if e.lab == nil {
		return
	}
	name, dir := e.lab.Name(), e.lab.Dir()
	if keep := os.Getenv("NETDRIFT_LAB_KEEP_LOGS"); keep != "" {
		// Debugging aid: keep every process's full log (the lab directory goes).
		dst := filepath.Join(keep, name)
		if out, err := exec.Command("cp", "-r", filepath.Join(dir, "logs"), dst).CombinedOutput(); err != nil {
			t.Logf("keeping logs in %s: %v %s", dst, err, out)
		}
	}
	if err := e.lab.Stop(); err != nil {
		t.Errorf("lab stop: %v", err)
	}
	if left := labenv.Leftovers(name, dir); len(left) > 0 {
		t.Errorf("left over after Stop: %v", left)
	}
}

// agent returns a client for node's agent.
func agent(t *testing.T, l *labenv.Lab, node string) *Agent {
	t.Helper()
	c, err := l.HTTPClient(node)
	if err != nil {
		t.Fatal(err)
	}
	return &Agent{Node: node, Base: "http://" + l.AgentAddr(node), HTTP: c}
}

func agentsOf(t *testing.T, l *labenv.Lab) []*Agent {
	var out []*Agent
	for _, n := range l.Nodes() {
		out = append(out, agent(t, l, n.Name))
	}
	return out
}

// waitAgentsReady waits until every node's agent is ready with a synced,
// healthy watch.
func waitAgentsReady(ctx context.Context, l *labenv.Lab) error {
	deadline := time.Now().Add(2 * time.Minute)
	for _, n := range l.Nodes() {
		c, err := l.HTTPClient(n.Name)
		if err != nil {
			return err
		}
		a := &Agent{Node: n.Name, Base: "http://" + l.AgentAddr(n.Name), HTTP: c}
		for {
			var st Status
			err := a.Get(ctx, "/v1/status", &st)
			if err == nil && st.Ready && st.Watch.Synced && st.Watch.Healthy {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("agent on %s not ready: %v %+v (log %s)", n.Name, err, st, l.LogPath("agent/"+n.Name))
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	return nil
}

// eventually polls cond until it returns true or timeout passes; the last
// message explains the failure.
func eventually(t *testing.T, timeout, every time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	var msg string
	for {
		var ok bool
		ok, msg = cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %s: %s", what, timeout, msg)
		}
		time.Sleep(every)
	}
}

// service creates a Service and one pod per given node (names
// <svc>-<suffix><i>) and waits until every node's kube-proxy programs them.
func service(t *testing.T, l *labenv.Lab, name string, nodes []string, preStop time.Duration) (cip string, pods []podInfo) {
	t.Helper()
	ctx := context.Background()
	sel := map[string]string{"app": name}
	svc, err := l.CreateService(ctx, labenv.ServiceSpec{Name: name, Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAll(l, name) })
	for i, n := range nodes {
		pods = append(pods, createPod(t, l, fmt.Sprintf("%s-a%d", name, i+1), n, sel, preStop))
	}
	waitProgrammed(t, l, svc.Spec.ClusterIP, backendsOf(pods), 60*time.Second)
	return svc.Spec.ClusterIP, pods
}

type podInfo struct{ Name, Node, IP string }

func (p podInfo) backend() string { return net.JoinHostPort(p.IP, fmt.Sprint(labenv.DefaultPodPort)) }

func backendsOf(ps []podInfo) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.backend())
	}
	sort.Strings(out)
	return out
}

func createPod(t *testing.T, l *labenv.Lab, name, node string, sel map[string]string, preStop time.Duration) podInfo {
	t.Helper()
	ctx := context.Background()
	spec := labenv.PodSpec{Name: name, Node: node, Labels: sel, PreStop: preStop}
	if preStop > 0 {
		spec.Grace = labenv.Grace(int64(preStop/time.Second) + 30)
	}
	if _, err := l.CreatePod(ctx, spec); err != nil {
		t.Fatal(err)
	}
	pod, err := l.WaitPodRunning(ctx, "default", name, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return podInfo{Name: name, Node: node, IP: pod.Status.PodIP}
}

// deleteAll removes a scenario's Service and pods (grace 0), best effort.
func deleteAll(l *labenv.Lab, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := l.Clientset()
	_ = l.DeleteService(ctx, "default", name)
	_ = cs.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: labenv.Grace(0)},
		metav1.ListOptions{LabelSelector: "app=" + name})
}

// waitProgrammed waits until every node's kube-proxy programs exactly want
// for ip:80.
func waitProgrammed(t *testing.T, l *labenv.Lab, ip string, want []string, timeout time.Duration) {
	t.Helper()
	for _, n := range l.Nodes() {
		eventually(t, timeout, 250*time.Millisecond, n.Name+": kube-proxy programs "+ip, func() (bool, string) {
			got, err := l.ProgrammedBackends(n.Name, ip, 80)
			return err == nil && equal(got, want), fmt.Sprintf("got %v (err %v), want %v", got, err, want)
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// waitConverged waits until no agent has pending changes or findings for
// svc ("default/<name>").
func waitConverged(t *testing.T, agents []*Agent, svc string, timeout time.Duration) {
	t.Helper()
	for _, a := range agents {
		eventually(t, timeout, 300*time.Millisecond, a.Node+": agent converged on "+svc, func() (bool, string) {
			var d Drift
			var lag Lag
			if err := a.Get(context.Background(), "/v1/drift", &d); err != nil {
				return false, err.Error()
			}
			if err := a.Get(context.Background(), "/v1/lag", &lag); err != nil {
				return false, err.Error()
			}
			for _, f := range append(d.Findings, d.Pending...) {
				if f.Service == svc {
					return false, "mismatch: " + f.Kind + " " + f.Detail
				}
			}
			for _, p := range lag.Pending {
				if p.Service == svc {
					return false, "pending change " + p.Change
				}
			}
			return true, ""
		})
	}
}

func findingsOf(d Drift, kind, svc string) []Finding {
	var out []Finding
	for _, f := range d.Findings {
		if f.Kind == kind && (svc == "" || f.Service == svc) {
			out = append(out, f)
		}
	}
	return out
}

func (e *env) dumpLogs(t *testing.T) {
	if e.lab == nil {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(e.lab.Dir(), "logs", "*.log"))
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		if len(b) > 2500 {
			b = b[len(b)-2500:]
		}
		t.Logf("==== %s (tail)\n%s", filepath.Base(f), b)
	}
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
