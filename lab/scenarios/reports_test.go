package scenarios

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/netdrift/netdrift/lab/labenv"
)

// The NodeReport custom resource (deploy/crds/) as the agents write it.
var nodeReports = schema.GroupVersionResource{Group: "netdrift.io", Version: "v1alpha1", Resource: "nodereports"}

// nodeReport is the subset of a NodeReport the scenarios read.
type nodeReport struct {
	Metadata struct {
		Name            string                  `json:"name"`
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
	Report struct {
		AgentVersion  string    `json:"agentVersion"`
		Datapath      string    `json:"datapath"`
		Heartbeat     time.Time `json:"heartbeat"`
		FindingsTotal int       `json:"findingsTotal"`
		Findings      []struct {
			Kind, Service, Frontend, Backend string
		} `json:"findings"`
		View struct {
			Current bool `json:"current"`
		} `json:"view"`
	} `json:"report"`
}

func (r nodeReport) lists(backend string) bool {
	for _, f := range r.Report.Findings {
		if f.Backend == backend {
			return true
		}
	}
	return false
}

// The chart rendered with every node-report option on: the CRD, the agent's RBAC and the
// own-node admission policies, as a cluster would get them.
const chartArgs = "nodeCondition.enabled=true,nodeEvents.enabled=true"

var (
	reportObjectsMu sync.Mutex
	reportObjects   = map[string]bool{} // by lab name: installed
)

// installReportObjects creates, once per lab, what the chart ships for node reports.
func installReportObjects(t *testing.T, l *labenv.Lab) {
	t.Helper()
	reportObjectsMu.Lock()
	defer reportObjectsMu.Unlock()
	if reportObjects[l.Name()] {
		return
	}
	if err := applyChartObjects(l); err != nil {
		t.Fatal(err)
	}
	reportObjects[l.Name()] = true
}

func helmBinary() (string, error) {
	p := os.Getenv("NETDRIFT_HELM")
	if p == "" {
		p = filepath.Join(labenv.ModuleDir(), "..", ".cache", "tools", "helm-v3.22.0")
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("helm %s: %w (run `make helm`, or set NETDRIFT_HELM)", p, err)
	}
	return p, nil
}

func applyChartObjects(l *labenv.Lab) error {
	helm, err := helmBinary()
	if err != nil {
		return err
	}
	out, err := exec.Command(helm, "template", "netdrift", filepath.Join(labenv.ModuleDir(), "..", "deploy", "helm", "netdrift"),
		"--namespace", "netdrift", "--set", chartArgs).Output()
	if err != nil {
		return fmt.Errorf("helm template: %w", err)
	}
	ctx := context.Background()
	cs := l.Clientset()
	dyn, err := dynamic.NewForConfig(l.RESTConfig())
	if err != nil {
		return err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := applyDoc(ctx, cs, dyn, doc); err != nil {
			return err
		}
	}
	return waitCRDServed(ctx, dyn)
}

// applyDoc creates the documents the scenarios need (the CRD, cluster RBAC, admission
// policies); the rest of the chart (the DaemonSet: the lab runs its agents itself) is left.
func applyDoc(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, doc []byte) error {
	var u unstructured.Unstructured
	if err := yaml.Unmarshal(doc, &u.Object); err != nil || u.Object == nil {
		return err
	}
	var err error
	switch u.GetKind() {
	case "CustomResourceDefinition":
		crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		_, err = dyn.Resource(crds).Create(ctx, &u, metav1.CreateOptions{})
	case "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		obj, _, derr := scheme.Codecs.UniversalDeserializer().Decode(mustJSON(u.Object), nil, nil)
		if derr != nil {
			return derr
		}
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
		}
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

func waitCRDServed(ctx context.Context, dyn dynamic.Interface) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := dyn.Resource(nodeReports).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodereports not served 30 s after the CRD was created: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// listReports is one LIST of every node's report.
func listReports(ctx context.Context, dyn dynamic.Interface) (map[string]nodeReport, error) {
	list, err := dyn.Resource(nodeReports).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]nodeReport{}
	for _, it := range list.Items {
		var r nodeReport
		if err := json.Unmarshal(mustJSON(it.Object), &r); err != nil {
			return nil, err
		}
		out[r.Metadata.Name] = r
	}
	return out, nil
}

// testNodeReports: every agent publishes its node's report; kube-proxy frozen on node-1
// while a backend is deleted puts that backend in node-1's report only (one LIST answers
// "which nodes still send traffic to it?"), sets node-1's NetdriftStaleDatapath condition
// and records an event; after the thaw the report is clean, the condition False and a
// "cleared" event recorded.
func testNodeReports(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	installReportObjects(t, l)
	dyn, err := dynamic.NewForConfig(l.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	nodes := l.Nodes()
	// Agents that started before the CRD existed retry within the heartbeat.
	eventually(t, 90*time.Second, time.Second, "a current report of every node", func() (bool, string) {
		rs, err := listReports(ctx, dyn)
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes {
			r, ok := rs[n.Name]
			if !ok || !r.Report.View.Current || time.Since(r.Report.Heartbeat) > time.Minute || r.Report.Datapath != e.mode {
				return false, fmt.Sprintf("%s: %+v (present %v)", n.Name, r.Report, ok)
			}
			node, err := l.Clientset().CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if o := r.Metadata.OwnerReferences; len(o) != 1 || o[0].Kind != "Node" || o[0].Name != n.Name || o[0].UID != node.UID {
				return false, fmt.Sprintf("%s: owner references %+v, want its Node (uid %s)", n.Name, o, node.UID)
			}
		}
		return true, ""
	})
	checkReportGoesWithItsNode(t, l, dyn)

	frozen := "node-1"
	_, pods := service(t, l, "ndr", []string{"node-2", "node-3"}, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, "default/ndr", 60*time.Second)
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
	deleted := time.Now()
	// --stale-after, then at most --node-report-min-interval to the write.
	took := eventually(t, 45*time.Second, 250*time.Millisecond, "node-1's report lists "+victim.backend(), func() (bool, string) {
		rs, err := listReports(ctx, dyn)
		if err != nil {
			return false, err.Error()
		}
		return rs[frozen].lists(victim.backend()), fmt.Sprintf("%+v", rs[frozen].Report)
	})
	rs, err := listReports(ctx, dyn)
	if err != nil {
		t.Fatal(err)
	}
	var still []string
	for name, r := range rs {
		if r.lists(victim.backend()) {
			still = append(still, name)
		}
	}
	t.Logf("one LIST of %d reports: nodes still sending to %s: %v (node-1's report listed it %s after the delete)",
		len(rs), victim.backend(), still, took.Round(100*time.Millisecond))
	if strings.Join(still, ",") != frozen {
		t.Errorf("the reports listing %s: %v, want only %s", victim.backend(), still, frozen)
	}
	checkTable(t, l, frozen)
	checkCondition(t, l, frozen, corev1.ConditionTrue, "StaleFindings", victim.backend())
	for _, n := range nodes {
		if n.Name != frozen {
			if c := nodeCondition(t, l, n.Name); c != nil && c.Status == corev1.ConditionTrue {
				t.Errorf("%s: NetdriftStaleDatapath True (%s) while its kube-proxy runs", n.Name, c.Message)
			}
		}
	}
	checkEvent(t, l, frozen, "StaleFindingsRaised", victim.backend(), deleted)

	if err := l.ThawKubeProxy(frozen); err != nil {
		t.Fatal(err)
	}
	thawed = true
	eventually(t, 45*time.Second, 250*time.Millisecond, "node-1's report clean after the thaw", func() (bool, string) {
		rs, err := listReports(ctx, dyn)
		if err != nil {
			return false, err.Error()
		}
		return !rs[frozen].lists(victim.backend()) && rs[frozen].Report.FindingsTotal == 0, fmt.Sprintf("%+v", rs[frozen].Report)
	})
	checkCondition(t, l, frozen, corev1.ConditionFalse, "NoStaleFindings", "")
	checkEvent(t, l, frozen, "StaleFindingsCleared", victim.backend(), deleted)
	checkPublisherState(t, agents)
}

// checkReportGoesWithItsNode: a report owned by its Node, as the agents write them, is
// deleted by the garbage collector when the Node is (a node removed from the cluster
// leaves no report behind).
func checkReportGoesWithItsNode(t *testing.T, l *labenv.Lab, dyn dynamic.Interface) {
	t.Helper()
	ctx := context.Background()
	cs := l.Clientset()
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone-1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), "gone-1", metav1.DeleteOptions{}) })
	body := mustJSON(map[string]any{"apiVersion": "netdrift.io/v1alpha1", "kind": "NodeReport",
		"metadata": map[string]any{"name": "gone-1", "ownerReferences": []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "gone-1", UID: node.UID}}},
		"report": map[string]any{"datapath": "iptables", "heartbeat": time.Now().UTC().Format(time.RFC3339), "heartbeatSeconds": 20,
			"view": map[string]any{"current": true}, "watch": map[string]any{"synced": true, "healthy": true}, "findingsTotal": 0}})
	if _, err := dyn.Resource(nodeReports).Patch(ctx, "gone-1", types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "netdrift-lab-probe"}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, "gone-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 90*time.Second, 500*time.Millisecond, "the report of a deleted Node garbage-collected", func() (bool, string) {
		_, err := dyn.Resource(nodeReports).Get(ctx, "gone-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	t.Logf("the report of a deleted Node was garbage-collected %s after the delete", took.Round(100*time.Millisecond))
}

// checkTable: kubectl's view (the Table form of the LIST) shows the printer columns, and
// node's row counts its finding.
func checkTable(t *testing.T, l *labenv.Lab, node string) {
	t.Helper()
	cfg := l.RESTConfig()
	cfg.GroupVersion = &schema.GroupVersion{Group: "netdrift.io", Version: "v1alpha1"}
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := rc.Get().Resource("nodereports").SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, ",") != "Name,Datapath,View current,Findings,Pending,Heartbeat age,Version" {
		t.Errorf("kubectl get nodereports columns %v", cols)
	}
	var cells []any
	for _, row := range table.Rows {
		if len(row.Cells) > 3 && row.Cells[0] == node {
			cells = row.Cells
		}
	}
	if cells == nil || fmt.Sprint(cells[3]) == "0" {
		t.Errorf("kubectl get nodereports: %s's row %v, want one counting its finding (%d rows)", node, cells, len(table.Rows))
	}
}

func nodeCondition(t *testing.T, l *labenv.Lab, node string) *corev1.NodeCondition {
	t.Helper()
	n, err := l.Clientset().CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == "NetdriftStaleDatapath" {
			return &c
		}
	}
	return nil
}

func checkCondition(t *testing.T, l *labenv.Lab, node string, status corev1.ConditionStatus, reason, inMessage string) {
	t.Helper()
	eventually(t, 15*time.Second, 250*time.Millisecond, fmt.Sprintf("%s: NetdriftStaleDatapath %s", node, status), func() (bool, string) {
		c := nodeCondition(t, l, node)
		if c == nil {
			return false, "no condition"
		}
		return c.Status == status && c.Reason == reason && strings.Contains(c.Message, inMessage), fmt.Sprintf("%+v", *c)
	})
}

// checkEvent waits for an events.k8s.io Event regarding node, by the netdrift controller,
// with reason and backend in its note, created after since.
func checkEvent(t *testing.T, l *labenv.Lab, node, reason, backend string, since time.Time) {
	t.Helper()
	eventually(t, 15*time.Second, 250*time.Millisecond, fmt.Sprintf("%s: a %s event", node, reason), func() (bool, string) {
		list, err := l.Clientset().EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Regarding.Kind != "Node" || ev.ReportingController != "netdrift" {
				continue
			}
			seen = append(seen, ev.Regarding.Name+" "+ev.Reason+": "+ev.Note)
			if ev.Regarding.Name == node && ev.Reason == reason && strings.Contains(ev.Note, backend) && ev.EventTime.After(since.Add(-time.Second)) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("netdrift events: %q", seen)
	})
}

// checkPublisherState: /v1/status shows the publisher's successful writes, and the
// metrics count them.
func checkPublisherState(t *testing.T, agents []*Agent) {
	t.Helper()
	ctx := context.Background()
	for _, a := range agents {
		var st struct {
			Report *struct {
				Enabled   bool      `json:"enabled"`
				LastWrite time.Time `json:"last_write"`
				LastError string    `json:"last_error"`
			} `json:"report"`
		}
		if err := a.Get(ctx, "/v1/status", &st); err != nil {
			t.Fatal(err)
		}
		if st.Report == nil || !st.Report.Enabled || time.Since(st.Report.LastWrite) > time.Minute || st.Report.LastError != "" {
			t.Errorf("%s: /v1/status report %+v", a.Node, st.Report)
		}
		m, err := a.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := m.Sum("netdrift_report_writes_total", map[string]string{"result": "success"}); !ok || n < 1 {
			t.Errorf("%s: netdrift_report_writes_total{result=success} %v (found %v)", a.Node, n, ok)
		}
	}
}

// testReportPolicy: the own-node restriction, enforced by the API server. A ServiceAccount
// with the chart's RBAC (and, here, delete on reports besides, so that the refusal is the
// policy's) whose token is bound to a pod on node-1 writes (updates, deletes, creates)
// node-1's report, node-1's
// NetdriftStaleDatapath condition and events about node-1; node-2's report, status and
// events are refused with the policy's message, and so is a change of another condition
// of node-1 and every write by a token without a node claim.
func testReportPolicy(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	installReportObjects(t, l)
	cs := l.Clientset()
	tok := podBoundToken(t, l, "node-1")
	unbound, err := cs.CoreV1().ServiceAccounts("netdrift").CreateToken(ctx, "netdrift",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agentCS, agentDyn := clientsFor(t, l, tok)
	_, unboundDyn := clientsFor(t, l, unbound.Status.Token)

	eventually(t, 90*time.Second, time.Second, "node-2's agent wrote its report", func() (bool, string) {
		_, err := agentDyn.Resource(nodeReports).Get(ctx, "node-2", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if err := applyReport(ctx, agentDyn, "node-1"); err != nil {
		t.Errorf("writing its own node's report: %v", err)
	}
	// Its own report may also go and come back: a delete, then an apply that creates.
	if err := agentDyn.Resource(nodeReports).Delete(ctx, "node-1", metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting its own node's report: %v", err)
	}
	if err := applyReport(ctx, agentDyn, "node-1"); err != nil {
		t.Errorf("creating its own node's report: %v", err)
	}
	own := "bound to a pod on node-1, not on node-2"
	forbidden(t, "write node-2's report", applyReport(ctx, agentDyn, "node-2"), own)
	forbidden(t, "delete node-2's report", agentDyn.Resource(nodeReports).Delete(ctx, "node-2", metav1.DeleteOptions{}), own)
	forbidden(t, "write node-1's report with a token without a node claim", applyReport(ctx, unboundDyn, "node-1"), "this token has no node claim")

	cond := func(node, typ string, status corev1.ConditionStatus) error {
		c := corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status, Reason: "LabProbe", Message: "lab",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
		if cur := nodeCondition(t, l, node); typ == "NetdriftStaleDatapath" && cur != nil {
			c = *cur // the agent's own condition, unchanged but for its heartbeat
			c.LastHeartbeatTime = metav1.Now()
		}
		body := mustJSON(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{c}}})
		_, err := agentCS.CoreV1().Nodes().PatchStatus(ctx, node, body)
		return err
	}
	if err := cond("node-1", "NetdriftStaleDatapath", corev1.ConditionFalse); err != nil {
		t.Errorf("patching its own node's NetdriftStaleDatapath: %v", err)
	}
	forbidden(t, "patch node-2's condition", cond("node-2", "NetdriftStaleDatapath", corev1.ConditionFalse), "not of node-2")
	forbidden(t, "change node-1's Ready condition", cond("node-1", string(corev1.NodeReady), corev1.ConditionUnknown), "changes no Node condition but NetdriftStaleDatapath")
	if c := nodeCondition(t, l, "node-1"); c == nil {
		t.Error("node-1 has no NetdriftStaleDatapath condition after the agent's patch")
	}

	event := func(node string) error {
		ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "netdrift-lab-", Namespace: "default"},
			EventTime: metav1.NowMicro(), ReportingController: "netdrift", ReportingInstance: "netdrift-lab", Action: "Audit",
			Reason: "LabProbe", Type: corev1.EventTypeNormal, Note: "lab",
			Regarding: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: types.UID(node)}}
		_, err := agentCS.EventsV1().Events("default").Create(ctx, ev, metav1.CreateOptions{})
		return err
	}
	if err := event("node-1"); err != nil {
		t.Errorf("an event about its own node: %v", err)
	}
	forbidden(t, "an event about node-2", event("node-2"), "events only regarding its own Node")
}

// forbidden checks that err is the API server's Forbidden carrying the policy's words.
func forbidden(t *testing.T, what string, err error, words string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), words) {
		t.Errorf("%s: %v; want Forbidden saying %q", what, err, words)
		return
	}
	t.Logf("%s: refused: %v", what, err)
}

// podBoundToken creates the netdrift ServiceAccount (namespace netdrift), a Pod object on
// node using it, a ClusterRole granting delete on reports besides the chart's RBAC, and
// returns a token bound to that pod: the API server adds the node claim.
func podBoundToken(t *testing.T, l *labenv.Lab, node string) string {
	t.Helper()
	ctx := context.Background()
	cs := l.Clientset()
	for _, err := range []error{
		ignoreExists(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "netdrift"}}, metav1.CreateOptions{})),
		ignoreExists(cs.CoreV1().ServiceAccounts("netdrift").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "netdrift"}}, metav1.CreateOptions{})),
		ignoreExists(cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "netdrift-lab-delete-reports"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"netdrift.io"}, Resources: []string{"nodereports"}, Verbs: []string{"delete"}}}}, metav1.CreateOptions{})),
		ignoreExists(cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "netdrift-lab-delete-reports"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "netdrift-lab-delete-reports"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "netdrift", Namespace: "netdrift"}}}, metav1.CreateOptions{})),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	pod, err := cs.CoreV1().Pods("netdrift").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "netdrift-token-" + node},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "netdrift",
			Containers: []corev1.Container{{Name: "agent", Image: "netdrift/netdrift"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods("netdrift").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: labenv.Grace(0)})
	})
	tr, err := cs.CoreV1().ServiceAccounts("netdrift").CreateToken(ctx, "netdrift", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// clientsFor are clients of the lab's API server authenticated by token only.
func clientsFor(t *testing.T, l *labenv.Lab, token string) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	cfg := rest.AnonymousClientConfig(l.RESTConfig())
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, dyn
}

// applyReport writes a small valid report for node by Server-Side Apply, as the agent does.
func applyReport(ctx context.Context, dyn dynamic.Interface, node string) error {
	body := mustJSON(map[string]any{"apiVersion": "netdrift.io/v1alpha1", "kind": "NodeReport", "metadata": map[string]any{"name": node},
		"report": map[string]any{"datapath": "iptables", "heartbeat": time.Now().UTC().Format(time.RFC3339), "heartbeatSeconds": 20,
			"view": map[string]any{"current": true}, "watch": map[string]any{"synced": true, "healthy": true}, "findingsTotal": 0}})
	_, err := dyn.Resource(nodeReports).Patch(ctx, node, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "netdrift-lab-probe", Force: ptr.To(true)})
	return err
}
