package scenarios

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/netdrift/netdrift/lab/labenv"
)

// testDocs: every shell command line of docs/install.md and
// docs/runbook.md that no other test runs, run as written (docShell;
// placeholders filled where the test says) against the lab's API server,
// with the chart's DaemonSet pods standing for the lab's agents
// (labenv.AdoptChartAgents): the Helm install with the runbook's
// DaemonSet commands (logs --previous after the lab restarted node-2's
// agent), the Cilium install, then the kubectl install (the overlay, the
// PrometheusRule against a minimal Prometheus Operator CRD, the plain
// manifest as a rolling update), each removed as the page says. A
// Service shop/cart whose backend on node-1 is deleted while node-2's
// kube-proxy is frozen gives explain, the plugin and the NodeReport query
// something to find. Runs before any scenario that creates the chart's
// objects without Helm (Helm refuses to adopt them).
func testDocs(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	reportObjectsMu.Lock()
	installed := reportObjects[l.Name()]
	reportObjectsMu.Unlock()
	if installed {
		t.Fatal("the chart's node-report objects were created without Helm by an earlier scenario; the docs scenario must run before it")
	}
	d := newDocShell(t, l)
	if err := l.AdoptChartAgents(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docRestore(t, l) })
	t.Cleanup(func() { docRemoveAll(t, d) })
	victim := docShopCart(t, l)

	docHelmStory(t, d, victim, e.mode)
	docCiliumStory(t, d)
	docKubectlStory(t, d)
	d.checkAllRun()
}

// docShopCart creates Service shop/cart with a backend on node-1 and one
// on node-3, programmed on every node, and returns node-1's.
func docShopCart(t *testing.T, l *labenv.Lab) podInfo {
	t.Helper()
	ctx := context.Background()
	cs := l.Clientset()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.ThawKubeProxy("node-2")
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), "shop", metav1.DeleteOptions{})
	})
	sel := map[string]string{"app": "cart"}
	svc, err := l.CreateService(ctx, labenv.ServiceSpec{Namespace: "shop", Name: "cart", Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var pods []podInfo
	for i, n := range []string{"node-1", "node-3"} {
		name := fmt.Sprintf("cart-a%d", i+1)
		if _, err := l.CreatePod(ctx, labenv.PodSpec{Namespace: "shop", Name: name, Node: n, Labels: sel}); err != nil {
			t.Fatal(err)
		}
		p, err := l.WaitPodRunning(ctx, "shop", name, 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, podInfo{Name: name, Node: n, IP: p.Status.PodIP})
	}
	waitProgrammed(t, l, svc.Spec.ClusterIP, backendsOf(pods), 60*time.Second)
	return pods[0]
}

// docStale freezes node-2's kube-proxy, deletes victim and waits until
// node-2's agent reports the stale backend.
func docStale(t *testing.T, l *labenv.Lab, victim podInfo) {
	t.Helper()
	ctx := context.Background()
	if err := l.FreezeKubeProxy("node-2"); err != nil {
		t.Fatal(err)
	}
	if err := l.DeletePod(ctx, "shop", victim.Name, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "node-2: stale_backend "+victim.backend(), func() (bool, string) {
		var dr Drift
		if err := agent(t, l, "node-2").Get(ctx, "/v1/drift", &dr); err != nil {
			return false, err.Error()
		}
		for _, f := range findingsOf(dr, "stale_backend", "shop/cart") {
			if f.Backend == victim.backend() {
				return true, ""
			}
		}
		return false, "findings " + kinds(dr.Findings)
	})
}

// docHelmStory: install.md's Helm install, the query block, the plugin's
// synopsis, the NodeReport lines and the runbook's DaemonSet lines.
func docHelmStory(t *testing.T, d *docShell, victim podInfo, mode string) {
	l := d.l
	d.mustExpect(d.run("install.md", docHelmInstall), 0, "STATUS: deployed")
	d.expect(d.run("install.md", docLabelNS), 0, "namespace/netdrift labeled")
	if ns, err := l.Clientset().CoreV1().Namespaces().Get(context.Background(), "netdrift", metav1.GetOptions{}); err != nil ||
		ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace netdrift after the label command: %v, labels %v", err, ns.GetLabels())
	}
	d.mustExpect(d.run("install.md", docRollout), 0, `daemon set "netdrift" successfully rolled out`)
	pods := docAgentPods(t, l, "registry.example/netdrift:0.1.0")

	// The lab restarts node-2's agent: its pod counts the restart, and the
	// previous run's log is what `logs --previous` shows.
	if err := l.StopAgent("node-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartAgent("node-2"); err != nil {
		t.Fatal(err)
	}
	if err := waitAgentsReady(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	docStale(t, l, victim)

	// The query block of install.md, one shell per line with the block's
	// assignment before it; NODE is the reader's variable.
	nodeEnv := []string{"NODE=node-2"}
	r := d.runIn("install.md", docPodVar, "", `; printf '%s\n' "$POD"`, nodeEnv)
	d.expect(r, 0)
	if got := strings.TrimSpace(r.out); got != "pod/"+pods["node-2"] {
		t.Errorf("POD=%q, want pod/%s", got, pods["node-2"])
	}
	d.expect(d.runIn("install.md", docExecStatus, docPodVar, "", nodeEnv), 0, "node-2", mode)
	d.expect(d.runIn("install.md", docExecExplain, docPodVar, "", nodeEnv), 0, "shop/cart", victim.IP)
	if b, _ := os.ReadFile(l.LogPath("nodestream/node-2")); !strings.Contains(string(b), "exec netdrift/"+pods["node-2"]+" -c agent") {
		t.Errorf("node-2's nodestream logged no exec in %s", pods["node-2"])
	}

	docReports(t, d, victim) // first: the plugin's cluster commands read the reports
	docPluginSynopsis(t, d, victim)
	docRunbookDaemonSet(t, d, pods)

	d.mustExpect(d.runInline("install.md", docHelmUninstall), 0, `release "netdrift" uninstalled`)
	docWaitNoAgentPods(t, l)
}

// docPluginSynopsis runs the commands install.md's plugin synopsis
// stands for: each alternative, with and without its optional parts, the
// placeholders filled (NODE node-2, NAMESPACE/NAME and NS/NAME shop/cart,
// IP the deleted backend, NODE-SELECTOR node-2's hostname label).
func docPluginSynopsis(t *testing.T, d *docShell, victim podInfo) {
	const sel = "kubernetes.io/hostname=node-2"
	run := func(synopsis, args string, codes ...int) docResult {
		r := d.runAs("install.md", synopsis, args)
		if !slices.Contains(codes, r.code) || strings.TrimSpace(r.out) == "" {
			t.Errorf("%s: exit %d (want %v), stdout %q, stderr %q", args, r.code, codes, r.out, r.serr)
		}
		return r
	}
	// Exit 0 with the agent's current view, 1 from drift: node-2 has a finding.
	for c, code := range map[string]int{"status": 0, "drift": 1, "lag": 0, "rsts": 0} {
		run(docSynQuery, "kubectl netdrift "+c+" --node node-2", code)
		run(docSynQuery, "kubectl netdrift "+c+" --node node-2 -o json", code)
	}
	if r := run(docSynExplain, "kubectl netdrift explain shop/cart --node node-2", 0); !strings.Contains(r.out, victim.IP) {
		t.Errorf("explain shop/cart on node-2 does not show %s", victim.IP)
	}
	for _, c := range []string{"status", "lag"} {
		// Every agent reports, current: 0.
		run(docSynCluster, "kubectl netdrift cluster "+c, 0)
		for _, o := range []string{"table", "json", "yaml"} {
			run(docSynCluster, "kubectl netdrift cluster "+c+" -l "+sel+" -o "+o, 0)
		}
	}
	run(docSynDrift, "kubectl netdrift cluster drift", 1)
	for _, b := range []string{victim.IP, victim.backend()} {
		if r := run(docSynDrift, "kubectl netdrift cluster drift --backend "+b, 1); !strings.Contains(r.out, "node-2") {
			t.Errorf("cluster drift --backend %s does not name node-2", b)
		}
	}
	run(docSynDrift, "kubectl netdrift cluster drift --service shop/cart", 1)
	run(docSynDrift, "kubectl netdrift cluster drift --backend "+victim.IP+" --service shop/cart -l "+sel, 1)
}

// docReports: the NodeReport lines, once every agent has published and
// node-2's report lists the stale backend.
func docReports(t *testing.T, d *docShell, victim podInfo) {
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(d.l.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, time.Second, "every node's report, node-2's listing "+victim.backend(), func() (bool, string) {
		rs, err := listReports(ctx, dyn)
		if err != nil {
			return false, err.Error()
		}
		return len(rs) == 3 && rs["node-2"].lists(victim.backend()), fmt.Sprintf("%d reports", len(rs))
	})
	r := d.run("install.md", docGetReports)
	d.expect(r, 0, "DATAPATH", "VIEW CURRENT", "FINDINGS", "PENDING", "HEARTBEAT AGE", "VERSION", "node-1", "node-2", "node-3")
	r = d.run("install.md", docReportsJQ, "10.244.2.7:8080", victim.backend())
	d.expect(r, 0)
	if strings.TrimSpace(r.out) != "node-2" {
		t.Errorf("the nodes whose report lists %s: %q, want node-2", victim.backend(), r.out)
	}
}

// docRunbookDaemonSet: the runbook's NetdriftAgentDown lines, POD being
// node-2's agent pod.
func docRunbookDaemonSet(t *testing.T, d *docShell, pods map[string]string) {
	l := d.l
	r := d.run("runbook.md", docGetDS)
	if d.expect(r, 0, "DESIRED") && !regexp.MustCompile(`(?m)^netdrift +3 +3 +3 +3 +3 `).MatchString(r.out) {
		t.Errorf("get ds: want 3 desired, current, ready, up-to-date and available")
	}
	r = d.run("runbook.md", docGetPods)
	d.expect(r, 0)
	for _, n := range l.Nodes() {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(pods[n.Name]) + ` +1/1 +Running +\d+ .* ` + regexp.QuoteMeta(n.IP) + ` +` + n.Name + ` `)
		if !re.MatchString(r.out) {
			t.Errorf("get pods -o wide: no line for %s Running with %s on %s", pods[n.Name], n.IP, n.Name)
		}
	}
	prev := docPreviousRun(t, l, "node-2")
	r = d.run("runbook.md", docLogsPrev, "POD", pods["node-2"])
	if d.expect(r, 0) && (strings.TrimSpace(prev) == "" || r.out != prev) {
		t.Errorf("logs --previous: %d bytes, want the previous run's log (%d bytes)", len(r.out), len(prev))
	}
	r = d.run("runbook.md", docDescribe, "POD", pods["node-2"])
	d.expect(r, 0, "node-2/"+l.Nodes()[1].IP)
	for _, re := range []string{`Controlled By: +DaemonSet/netdrift`, `Status: +Running`, `Restart Count: +[1-9]`, `Last State: +Terminated`, `Ready: +True`} {
		if !regexp.MustCompile(re).MatchString(r.out) {
			t.Errorf("describe pod: no %q", re)
		}
	}
}

// docPreviousRun reads the run of node's agent before the current one from
// the lab's log and its run boundaries.
func docPreviousRun(t *testing.T, l *labenv.Lab, node string) string {
	t.Helper()
	log, err := os.ReadFile(l.LogPath("agent/" + node))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := os.ReadFile(l.LogPath("agent/"+node) + ".runs")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(runs))
	if len(f) < 2 {
		t.Fatalf("%s agent: %d runs recorded, want 2", node, len(f))
	}
	from, to := atoi(f[len(f)-2]), atoi(f[len(f)-1])
	return string(log[from:to])
}

// docCiliumStory: the Cilium install gives the agent the node's bpf
// filesystem, read-only, and --bpffs.
func docCiliumStory(t *testing.T, d *docShell) {
	d.mustExpect(d.run("install.md", docHelmCilium), 0, "STATUS: deployed")
	ds, err := d.l.Clientset().AppsV1().DaemonSets("netdrift").Get(context.Background(), "netdrift", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := ds.Spec.Template.Spec
	var args []string
	var ro bool
	for _, c := range spec.Containers {
		if c.Name == "agent" {
			args = c.Args
			for _, m := range c.VolumeMounts {
				ro = ro || m.MountPath == "/sys/fs/bpf" && m.ReadOnly
			}
		}
	}
	var host bool
	for _, v := range spec.Volumes {
		host = host || v.HostPath != nil && v.HostPath.Path == "/sys/fs/bpf"
	}
	if !slices.Contains(args, "--bpffs=/sys/fs/bpf") || !ro || !host {
		t.Errorf("cilium.enabled: agent args %q, /sys/fs/bpf mounted read-only %t, host path %t", args, ro, host)
	}
	d.mustExpect(d.runInline("install.md", docHelmUninstall), 0, `release "netdrift" uninstalled`)
	docWaitNoAgentPods(t, d.l)
}

// docKubectlStory: install.md's kubectl install with the overlay, the
// PrometheusRule, then the plain manifest (the page's alternative) as a
// rolling update back to the chart's image, and the page's removal.
func docKubectlStory(t *testing.T, d *docShell) {
	l := d.l
	installPrometheusOperatorCRDs(t, l)
	d.mustExpect(d.run("install.md", docApplyK), 0, "daemonset.apps/netdrift created", "servicemonitor.monitoring.coreos.com/netdrift created")
	d.expect(d.run("install.md", docApplyRules), 0, "prometheusrule.monitoring.coreos.com/netdrift created")
	d.mustExpect(d.run("install.md", docRollout), 0, `daemon set "netdrift" successfully rolled out`)
	docAgentPods(t, l, "registry.example/netdrift:0.1.0")

	d.mustExpect(d.run("install.md", docApplyF), 0, "daemonset.apps/netdrift configured")
	d.mustExpect(d.run("install.md", docRollout), 0, `daemon set "netdrift" successfully rolled out`)
	docAgentPods(t, l, "netdrift/netdrift:")

	d.mustExpect(d.runInline("install.md", docKubectlDelete), 0, `namespace "netdrift" deleted`, `prometheusrule.monitoring.coreos.com "netdrift" deleted`)
	docWaitNamespaceGone(t, l)
}

// docAgentPods returns the chart's agent pod of every node, each Running
// and Ready with its node's IP, its image starting with image.
func docAgentPods(t *testing.T, l *labenv.Lab, image string) map[string]string {
	t.Helper()
	out := map[string]string{}
	eventually(t, 60*time.Second, 300*time.Millisecond, "one Running chart agent pod per node, image "+image, func() (bool, string) {
		list, err := l.Clientset().CoreV1().Pods("netdrift").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=netdrift,app.kubernetes.io/component=agent"})
		if err != nil {
			return false, err.Error()
		}
		clear(out)
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || len(p.Spec.Containers) == 0 || !strings.HasPrefix(p.Spec.Containers[0].Image, image) {
				return false, fmt.Sprintf("%s: phase %s, node %q, image %s", p.Name, p.Status.Phase, p.Spec.NodeName, p.Spec.Containers[0].Image)
			}
			for _, n := range l.Nodes() {
				if n.Name == p.Spec.NodeName && p.Status.PodIP == n.IP {
					out[n.Name] = p.Name
				}
			}
		}
		return len(out) == len(l.Nodes()) && len(list.Items) == len(out), fmt.Sprintf("%d pods, %v", len(list.Items), out)
	})
	return out
}

// docWaitNoAgentPods waits until the chart's agent pods and its NodeReport
// CRD (removed with the release: a CRD still being deleted refuses the next
// install's) are gone.
func docWaitNoAgentPods(t *testing.T, l *labenv.Lab) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(l.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, 300*time.Millisecond, "no chart agent pods and no NodeReport CRD left", func() (bool, string) {
		list, err := l.Clientset().CoreV1().Pods("netdrift").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=netdrift"})
		if err != nil {
			return false, err.Error()
		}
		_, err = dyn.Resource(crdGVR).Get(context.Background(), "nodereports.netdrift.io", metav1.GetOptions{})
		return len(list.Items) == 0 && apierrors.IsNotFound(err), fmt.Sprintf("%d pods, CRD: %v", len(list.Items), err)
	})
}

func docWaitNamespaceGone(t *testing.T, l *labenv.Lab) {
	t.Helper()
	eventually(t, 2*time.Minute, 500*time.Millisecond, "namespace netdrift gone", func() (bool, string) {
		_, err := l.Clientset().CoreV1().Namespaces().Get(context.Background(), "netdrift", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// The Prometheus Operator's two CRDs the manifests use, in their minimal
// form: the group, version, kinds and names of the operator's, with a
// schema that keeps every field (the operator's validates them; what this
// checks is that the objects apply and are served).
var prometheusOperatorCRDs = []struct{ kind, plural string }{{"ServiceMonitor", "servicemonitors"}, {"PrometheusRule", "prometheusrules"}}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func installPrometheusOperatorCRDs(t *testing.T, l *labenv.Lab) {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(l.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range prometheusOperatorCRDs {
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": c.plural + ".monitoring.coreos.com"},
			"spec": map[string]any{
				"group": "monitoring.coreos.com", "scope": "Namespaced",
				"names": map[string]any{"kind": c.kind, "listKind": c.kind + "List", "plural": c.plural, "singular": strings.ToLower(c.kind)},
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}}
		if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dyn.Resource(crdGVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{}) })
		gvr := schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: c.plural}
		eventually(t, 30*time.Second, 200*time.Millisecond, c.plural+" served", func() (bool, string) {
			_, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
}

// docRemoveAll removes what the stories installed when one stopped
// half-way (nothing is left on success), so that later scenarios find
// the lab as it was.
func docRemoveAll(t *testing.T, d *docShell) {
	if !t.Failed() {
		return
	}
	d.shell("helm uninstall netdrift -n netdrift", nil)
	d.shell("kubectl delete --ignore-not-found -f deploy/prometheus-rules.yaml -f deploy/daemonset.yaml", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if _, err := d.l.Clientset().CoreV1().Namespaces().Get(ctx, "netdrift", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// docRestore gives the lab its own agent pods back and waits for the agents.
func docRestore(t *testing.T, l *labenv.Lab) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := l.ReleaseChartAgents(ctx); err != nil {
		t.Errorf("release the chart's agent pods: %v", err)
	}
	if err := waitAgentsReady(ctx, l); err != nil {
		t.Errorf("agents after the docs scenario: %v", err)
	}
}
