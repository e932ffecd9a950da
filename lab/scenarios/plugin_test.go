package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/netdrift/netdrift/lab/labenv"
)

// testPlugin: the kubectl plugin, run as a process with a kubeconfig in the
// router namespace (where a laptop's kubectl would stand: it reaches only
// the API server). `status --node node-2` answers with node-2's agent
// through the API server's pods/portforward and node-2's nodestream; a
// ServiceAccount bound to the chart's netdrift-responder Role gets the same
// answer, one without it is told which permission is missing. Then
// `cluster drift --backend IP`, over NodeReports this scenario writes from
// each agent's own answers while node-2's kube-proxy is frozen after a
// backend's deletion, names node-2 only, for the admin and for a user bound
// to the chart's netdrift-cluster-reader ClusterRole alone; the namespace
// responder is refused with the RBAC the cluster commands need.
func testPlugin(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	bin := pluginBinary(t)
	// The chart's NodeReport CRD, so that every agent publishes from the start.
	installReportObjects(t, l)

	var direct Status
	if err := agent(t, l, "node-2").Get(ctx, "/v1/status", &direct); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runPlugin(t, l, bin, l.Kubeconfig(), "status", "--node", "node-2", "-o", "json")
	var st Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Node != "node-2" || st.Datapath != direct.Datapath {
		t.Fatalf("admin: status --node node-2: exit %d, stdout %q, stderr %q; want node-2's status (datapath %s)", code, out, stderr, direct.Datapath)
	}
	if log, _ := os.ReadFile(l.LogPath("nodestream/node-2")); !bytes.Contains(log, []byte("port-forward POST "+labenv.AgentNamespace+"/"+labenv.AgentPodName("node-2"))) {
		t.Errorf("node-2's nodestream logged no port-forward to the agent pod:\n%s", log)
	}
	t.Logf("admin: status --node node-2 answered by %s (%s)", st.Node, st.Datapath)

	responder := saKubeconfig(t, l, "responder", chartResponderRole(t))
	out, stderr, code = runPlugin(t, l, bin, responder, "status", "--node", "node-2")
	if code != 0 || !strings.Contains(out, "node-2") {
		t.Fatalf("responder: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	t.Logf("responder (the chart's Role): status --node node-2:\n%s", out)

	nobody := saKubeconfig(t, l, "nobody", nil)
	_, stderr, code = runPlugin(t, l, bin, nobody, "status", "--node", "node-2")
	if code != 2 || !strings.Contains(stderr, `you may not list pods in namespace "netdrift"`) {
		t.Errorf("no RBAC: exit %d, stderr %q; want 2 and the missing permission", code, stderr)
	}
	t.Logf("no RBAC: %s", strings.TrimSpace(stderr))

	lister := saKubeconfig(t, l, "lister", &rbacv1.Role{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}})
	_, stderr, code = runPlugin(t, l, bin, lister, "status", "--node", "node-2")
	if code != 2 || !strings.Contains(stderr, "may not port-forward") || !strings.Contains(stderr, "create on pods/portforward") {
		t.Errorf("pods list without pods/portforward: exit %d, stderr %q", code, stderr)
	}

	_, stderr, code = runPlugin(t, l, bin, l.Kubeconfig(), "status", "--node", "node-9")
	if code != 2 || !strings.Contains(stderr, `no agent pod on node "node-9"`) || !strings.Contains(stderr, "node-1, node-2, node-3") {
		t.Errorf("unknown node: exit %d, stderr %q", code, stderr)
	}

	// An agent that does not listen: its pod is Running, the forward's dial fails.
	if err := l.StopAgent("node-3"); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runPlugin(t, l, bin, l.Kubeconfig(), "status", "--node", "node-3")
	t.Logf("agent on node-3 stopped: exit %d, stderr:\n%s", code, stderr)
	// The cause is the refused dial, or EOF when the port-forward stream
	// closes before its error frame reaches the client (seen once under load).
	if code != 2 || !strings.Contains(stderr, `the agent on node "node-3" does not answer on port 9760`) ||
		!(strings.Contains(stderr, "connection refused") || strings.Contains(stderr, "(Running): EOF")) {
		t.Errorf("agent not listening: exit %d, want 2 and the refused dial (or the stream's EOF)", code)
	}
	if _, err := l.StartAgent("node-3"); err != nil {
		t.Fatal(err)
	}
	if err := waitAgentsReady(ctx, l); err != nil {
		t.Fatal(err)
	}

	testPluginClusterDrift(t, e, bin)
}

// testPluginClusterDrift freezes node-2's kube-proxy, deletes the backend
// on node-1 and, once node-2's agent has published the stale DNAT in its
// NodeReport, asks the plugin across nodes.
func testPluginClusterDrift(t *testing.T, e *env, bin string) {
	l := e.lab
	ctx := context.Background()
	_, pods := service(t, l, "plg", []string{"node-1", "node-3"}, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, "default/plg", 60*time.Second)
	if err := l.FreezeKubeProxy("node-2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.ThawKubeProxy("node-2") })
	victim := pods[0]
	if err := l.DeletePod(ctx, "default", victim.Name, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "node-2: stale_backend "+victim.backend(), func() (bool, string) {
		var d Drift
		if err := agent(t, l, "node-2").Get(ctx, "/v1/drift", &d); err != nil {
			return false, err.Error()
		}
		for _, f := range findingsOf(d, "stale_backend", "default/plg") {
			if f.Backend == victim.backend() {
				return true, ""
			}
		}
		return false, "findings " + kinds(d.Findings)
	})
	// The responder command's exit status passes through: 1, findings.
	out, stderr, code := runPlugin(t, l, bin, l.Kubeconfig(), "drift", "--node", "node-2")
	if code != 1 || !strings.Contains(out, victim.backend()) {
		t.Errorf("drift --node node-2: exit %d, stdout %q, stderr %q; want 1 and %s", code, out, stderr, victim.backend())
	}
	// The agents publish their NodeReports themselves (the harness's
	// --node-report flags; the chart's CRD, installed by testPlugin).
	dyn, err := dynamic.NewForConfig(l.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, 500*time.Millisecond, "node-2's NodeReport lists "+victim.backend(), func() (bool, string) {
		rs, err := listReports(ctx, dyn)
		if err != nil {
			return false, err.Error()
		}
		return len(rs) == 3 && rs["node-2"].lists(victim.backend()), fmt.Sprintf("%d reports, node-2: %d findings", len(rs), rs["node-2"].Report.FindingsTotal)
	})
	out, stderr, code = runPlugin(t, l, bin, l.Kubeconfig(), "cluster", "drift", "--backend", victim.IP)
	t.Logf("kubectl-netdrift cluster drift --backend %s (exit %d):\n%s%s", victim.IP, code, out, stderr)
	if code != 1 || !strings.Contains(out, "node-2") || strings.Contains(out, "node-1") || strings.Contains(out, "node-3") ||
		!strings.Contains(out, "1 of 3 nodes with rules that still DNAT to "+victim.IP) {
		t.Errorf("cluster drift --backend %s: exit %d; want 1 and node-2 only", victim.IP, code)
	}
	checkClusterReader(t, l, bin, victim.IP, out)
	out, _, _ = runPlugin(t, l, bin, l.Kubeconfig(), "cluster", "drift", "--backend", victim.IP, "-o", "json")
	var d struct {
		Kind  string `json:"kind"`
		Nodes []struct {
			Node string `json:"node"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.Kind != "ClusterDrift" || len(d.Nodes) != 1 || d.Nodes[0].Node != "node-2" {
		t.Errorf("-o json: %v %s", err, out)
	}

	// Every kubectl netdrift command the runbook shows runs as written, its
	// placeholders filled with this story's node, backend and Service.
	runRunbookCommands(t, l, bin, strings.NewReplacer("NODE", "node-2", "NS/NAME", "default/plg", "IP", victim.IP))

	// cluster status: every agent reports, current; node-2 alone has findings.
	out, stderr, code = runPlugin(t, l, bin, l.Kubeconfig(), "cluster", "status", "-o", "json")
	var s struct {
		Kind    string `json:"kind"`
		Summary struct {
			Nodes, OK, WithFindings int
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 || s.Kind != "ClusterStatus" || s.Summary.Nodes != 3 || s.Summary.OK != 3 || s.Summary.WithFindings != 1 {
		t.Errorf("cluster status: exit %d, %v, stdout %s, stderr %s", code, err, out, stderr)
	}
}

func pluginBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("NETDRIFT_PLUGIN_BIN")
	if p == "" {
		agentBin, err := agentBinary()
		if err != nil {
			t.Fatal(err)
		}
		p = filepath.Join(filepath.Dir(agentBin), "kubectl-netdrift")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("plugin binary %s: %v (run `make build`, or set NETDRIFT_PLUGIN_BIN)", p, err)
	}
	return p
}

// runPlugin runs the plugin in the router namespace and returns its
// stdout, stderr and exit status.
func runPlugin(t *testing.T, l *labenv.Lab, bin, kubeconfig string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{"netns", "exec", l.RouterNetNS(), bin, "--kubeconfig", kubeconfig}, args...)
	cmd := exec.CommandContext(ctx, "ip", full...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &exit):
		return stdout.String(), stderr.String(), exit.ExitCode()
	}
	t.Fatalf("run %s: %v", bin, err)
	return "", "", -1
}

// chartResponderRole is the netdrift-responder Role of deploy/daemonset.yaml
// (rendered from the chart's responder-rbac.yaml).
func chartResponderRole(t *testing.T) *rbacv1.Role {
	return chartObject[rbacv1.Role](t, "Role", "netdrift-responder")
}

// chartObject is the object of kind and name in deploy/daemonset.yaml (the
// chart rendered with its plain values), decoded into T.
func chartObject[T any](t *testing.T, kind, name string) *T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(labenv.ModuleDir(), "..", "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if yaml.Unmarshal([]byte(doc), &meta) != nil || meta.Kind != kind || meta.Metadata.Name != name {
			continue
		}
		var obj T
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		return &obj
	}
	t.Fatalf("deploy/daemonset.yaml has no %s %s", kind, name)
	return nil
}

// saKubeconfig creates ServiceAccount name in the agents' namespace, bound
// to role's rules (nil: bound to nothing), and writes a kubeconfig with a
// token of it.
func saKubeconfig(t *testing.T, l *labenv.Lab, name string, role *rbacv1.Role) string {
	t.Helper()
	ctx := context.Background()
	cs := l.Clientset()
	ns := labenv.AgentNamespace
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "plg-" + name, Namespace: ns}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().ServiceAccounts(ns).Delete(context.Background(), sa.Name, metav1.DeleteOptions{})
	})
	if role != nil {
		r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa.Name, Namespace: ns}, Rules: role.Rules}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa.Name, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}}}
		if _, err := cs.RbacV1().Roles(ns).Create(ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.RbacV1().RoleBindings(ns).Delete(context.Background(), rb.Name, metav1.DeleteOptions{})
			_ = cs.RbacV1().Roles(ns).Delete(context.Background(), r.Name, metav1.DeleteOptions{})
		})
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(l.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.ClientCertificate, ai.ClientKey, ai.ClientCertificateData, ai.ClientKeyData = "", "", nil, nil
		ai.Token = tok.Status.Token
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runRunbookCommands runs every `kubectl netdrift ...` line of docs/runbook.md's
// code blocks (placeholders filled by fill) against the lab with the admin
// kubeconfig: each must answer (exit 0, or 1 for findings), never fail to.
func runRunbookCommands(t *testing.T, l *labenv.Lab, bin string, fill *strings.Replacer) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(labenv.ModuleDir(), "..", "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	n, in := 0, false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in || !strings.HasPrefix(line, "kubectl netdrift ") {
			continue
		}
		if k := strings.Index(line, " #"); k >= 0 {
			line = line[:k]
		}
		args := strings.Fields(fill.Replace(strings.TrimPrefix(line, "kubectl netdrift ")))
		out, stderr, code := runPlugin(t, l, bin, l.Kubeconfig(), args...)
		if (code != 0 && code != 1) || strings.TrimSpace(out) == "" {
			t.Errorf("runbook: kubectl netdrift %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, stderr)
		}
		n++
	}
	t.Logf("ran the runbook's %d kubectl netdrift command lines", n)
	if n < 10 {
		t.Errorf("found %d kubectl netdrift lines in docs/runbook.md's code blocks; the extraction is broken", n)
	}
}
