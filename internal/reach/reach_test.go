package reach

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/netdrift/netdrift/internal/textmatch"
)

var agentLabels = map[string]string{"app.kubernetes.io/name": "netdrift", "app.kubernetes.io/component": "agent"}

func agentPod(name, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "netdrift", Labels: agentLabels},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, Containers: []corev1.Container{{
			Name: "agent", Args: []string{"agent", "--node-name=$(NODE_NAME)", "--listen=127.0.0.1:9760"}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// fakeWithFieldSelector is a fake clientset whose pod LIST honours the
// spec.nodeName field selector (the fake tracker honours only labels).
func fakeWithFieldSelector(objs ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(objs...)
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		fs := a.(k8stesting.ListAction).GetListRestrictions().Fields
		if fs == nil || fs.Empty() {
			return false, nil, nil
		}
		out := &corev1.PodList{}
		for _, o := range objs {
			p := o.(*corev1.Pod)
			if p.Namespace == a.GetNamespace() && fs.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName}) {
				out.Items = append(out.Items, *p)
			}
		}
		return true, out, nil
	})
	return cs
}

func TestFindAgentPod(t *testing.T) {
	cs := fakeWithFieldSelector(
		agentPod("netdrift-a", "worker-1", corev1.PodRunning),
		agentPod("netdrift-b", "worker-2", corev1.PodPending),
		agentPod("netdrift-c", "worker-10", corev1.PodRunning),
	)
	ctx := context.Background()
	p, err := findAgentPod(ctx, cs, "netdrift", AgentSelector, "worker-1")
	if err != nil || p.Name != "netdrift-a" {
		t.Fatalf("worker-1: got %v, %v; want netdrift-a", p, err)
	}
	_, err = findAgentPod(ctx, cs, "netdrift", AgentSelector, "worker-2")
	if err == nil || !strings.Contains(err.Error(), "not running") || !strings.Contains(err.Error(), "netdrift-b is Pending") {
		t.Fatalf("worker-2 (Pending): got %v", err)
	}
	_, err = findAgentPod(ctx, cs, "netdrift", AgentSelector, "worker-3")
	if err == nil {
		t.Fatal("worker-3 has no agent: want an error")
	}
	for _, want := range []string{`no agent pod on node "worker-3"`, "did you mean worker-1", "nodes with an agent: worker-1, worker-10, worker-2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("worker-3 error %q lacks %q", err, want)
		}
	}
}

func TestFindAgentPodNoneInstalled(t *testing.T) {
	_, err := findAgentPod(context.Background(), fakeWithFieldSelector(), "netdrift", AgentSelector, "n1")
	if err == nil || !strings.Contains(err.Error(), "is netdrift installed there") {
		t.Fatalf("got %v", err)
	}
}

func TestFindAgentPodForbidden(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil)
	})
	_, err := findAgentPod(context.Background(), cs, "ops", AgentSelector, "n1")
	if err == nil || !strings.Contains(err.Error(), `you may not list pods in namespace "ops"`) ||
		!strings.Contains(err.Error(), "create on pods/portforward") {
		t.Fatalf("got %v", err)
	}
}

func TestPickRunningSkipsTerminating(t *testing.T) {
	old := agentPod("old", "n1", corev1.PodRunning)
	now := metav1.Now()
	old.DeletionTimestamp = &now
	cur := agentPod("new", "n1", corev1.PodRunning)
	p, err := pickRunning([]corev1.Pod{*old, *cur}, "netdrift", "n1")
	if err != nil || p.Name != "new" {
		t.Fatalf("got %v, %v", p, err)
	}
	_, err = pickRunning([]corev1.Pod{*old}, "netdrift", "n1")
	if err == nil || !strings.Contains(err.Error(), "old is terminating") {
		t.Fatalf("got %v", err)
	}
}

func TestAgentPort(t *testing.T) {
	p := agentPod("a", "n", corev1.PodRunning)
	p.Spec.Containers[0].Args = []string{"agent", "--listen", "0.0.0.0:9999"}
	if got := agentPort(p); got != 9999 {
		t.Errorf("--listen ADDR: got %d", got)
	}
	p.Spec.Containers[0].Args = []string{"agent", "--listen=127.0.0.1:9760"}
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "https-metrics", ContainerPort: 9761}, {Name: LocalPortName, ContainerPort: 9770}}
	if got := agentPort(p); got != 9770 {
		t.Errorf("named port: got %d", got)
	}
	p.Spec.Containers[0].Ports = nil
	p.Spec.Containers[0].Args = []string{"agent", "--listen=bogus"}
	if got := agentPort(p); got != DefaultAgentPort {
		t.Errorf("no usable port: got %d, want %d", got, DefaultAgentPort)
	}
}

func TestCloseMatches(t *testing.T) {
	names := []string{"ip-10-0-1-5.ec2.internal", "ip-10-0-1-6.ec2.internal", "node-1", "node-2", "node-12"}
	if got := textmatch.Closest("ip-10-0-1-5", names, 3); len(got) == 0 || got[0] != "ip-10-0-1-5.ec2.internal" {
		t.Errorf("prefix: got %v", got)
	}
	if got := textmatch.Closest("node-3", names, 3); strings.Join(got, ",") != "node-1,node-2,node-12" {
		t.Errorf("typo: got %v", got)
	}
	if got := textmatch.Closest("gpu-pool-a", names, 3); len(got) != 0 {
		t.Errorf("unrelated: got %v", got)
	}
}

func TestReachNeedsANode(t *testing.T) {
	r := newWith(nil, fake.NewClientset(), "")
	if r.Namespace() != DefaultNamespace {
		t.Errorf("namespace %q", r.Namespace())
	}
	if _, _, err := r.Reach(context.Background(), ""); err == nil || !strings.Contains(err.Error(), "--node") {
		t.Fatalf("got %v", err)
	}
}

func TestExplainForwardErrorNamesMissingVerbs(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authzv1.SelfSubjectAccessReview)
		r.Status.Allowed = r.Spec.ResourceAttributes.Verb == "create" // create granted, get not
		return true, r, nil
	})
	r := newWith(nil, cs, "ops")
	err := r.explainForwardError(context.Background(), "netdrift-x", "n1", errors.New("upgrade refused"))
	for _, want := range []string{"you may not port-forward", `namespace "ops"`, "lacks get (", "upgrade refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	cs = fake.NewClientset()
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authzv1.SelfSubjectAccessReview)
		r.Status.Allowed = true
		return true, r, nil
	})
	err = newWith(nil, cs, "ops").explainForwardError(context.Background(), "netdrift-x", "n1", errors.New("connection reset"))
	if strings.Contains(err.Error(), "may not") || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("allowed caller: %q", err)
	}
}

func TestProbe(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	defer ok.Close()
	if err := probe(context.Background(), ok.URL, &lastError{}); err != nil {
		t.Errorf("healthy agent: %v", err)
	}
	errs := &lastError{}
	errs.logger().Error(errors.New("dial tcp 10.0.0.1:9760: connect: connection refused"), "An error occurred forwarding")
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if err := probe(context.Background(), closed.URL, errs); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("refused forward: %v, want the forward's logged error", err)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer bad.Close()
	if err := probe(context.Background(), bad.URL, &lastError{}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("503: %v", err)
	}
}

func TestSetSelector(t *testing.T) {
	r := newWith(nil, fake.NewClientset(), "")
	for _, bad := range []string{"", "app in (", "=x"} {
		if err := r.SetSelector(bad); err == nil {
			t.Errorf("selector %q accepted", bad)
		}
	}
	if err := r.SetSelector("app.kubernetes.io/name=nd,app.kubernetes.io/component=agent"); err != nil || r.selector != "app.kubernetes.io/name=nd,app.kubernetes.io/component=agent" {
		t.Errorf("valid selector: %v, %q", err, r.selector)
	}
}
