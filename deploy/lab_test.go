//go:build lab

// Tests against the lab's real kube-apiserver (lab/, its own module). Run as root:
//
//	go test -tags lab -run Lab -v ./deploy/      (make test-deploy-lab)
//
// The lab is driven through its command (`lab up|down`), built into a temporary directory,
// and reached with the host kubeconfig it writes; the first run builds the Kubernetes
// binaries and takes minutes.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/netdrift/netdrift/internal/authn"
)

// startLab brings up a one-node lab and returns an admin REST config for it.
func startLab(t *testing.T) *rest.Config {
	t.Helper()
	requireRoot(t)
	labMod, err := filepath.Abs("../lab")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	labBin := filepath.Join(tmp, "lab")
	build := exec.Command("go", "build", "-o", labBin, "./cmd/lab")
	build.Dir = labMod
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the lab command: %v\n%s", err, out)
	}
	name := fmt.Sprintf("dep%d", os.Getpid()%100000)
	dir := filepath.Join(tmp, "labdir")
	lab := func(args ...string) ([]byte, error) {
		cmd := exec.Command(labBin, args...)
		cmd.Dir = labMod
		cmd.Env = append(os.Environ(), "NETDRIFT_LAB_MODULE="+labMod)
		return cmd.CombinedOutput()
	}
	t.Cleanup(func() {
		if out, err := lab("down", "-name", name, "-dir", dir); err != nil {
			t.Errorf("lab down: %v\n%s", err, out)
		}
	})
	start := time.Now()
	out, err := lab("up", "-name", name, "-dir", dir, "-nodes", "1")
	if err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	t.Logf("lab up in %s", time.Since(start).Round(time.Second))
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig-host"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// objects reads daemonset.yaml as unstructured objects, in file order.
func objects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return objectsOf(t, readFile(t, manifestFile))
}

func objectsOf(t *testing.T, manifest []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		if string(js) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
}

// apply server-side-applies objs; dryRun asks the API server to validate and admit them
// without persisting anything.
func apply(t *testing.T, cfg *rest.Config, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubernetes.NewForConfigOrDie(cfg).Discovery()))
	opts := metav1.ApplyOptions{FieldManager: "netdrift-deploy-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s %s: %v", gvk.Kind, o.GetName(), err)
			continue
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if o.GetNamespace() != "" {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, opts); err != nil {
			t.Errorf("apply (dry-run %v) %s %s/%s: %v", dryRun, gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
}

func TestLabManifestsServerSideDryRun(t *testing.T) {
	cfg := startLab(t)
	var ns, others, monitoring []*unstructured.Unstructured
	for _, o := range objects(t) {
		switch {
		case o.GetKind() == "Namespace":
			ns = append(ns, o)
		case o.GroupVersionKind().Group == "monitoring.coreos.com":
			monitoring = append(monitoring, o)
		default:
			others = append(others, o)
		}
	}
	// The namespace must exist for namespaced objects to be dry-run into it.
	apply(t, cfg, ns, true)
	apply(t, cfg, ns, false)
	apply(t, cfg, others, true)
	for _, o := range monitoring {
		t.Logf("%s %s not dry-run: the lab has no Prometheus Operator CRDs (strictly decoded in manifests_test.go)", o.GetKind(), o.GetName())
	}
	// The chart as `helm install` renders it, with the values that change objects.
	for _, set := range []string{
		"",
		"secureEndpoint.enabled=false,seccompProfile.type=RuntimeDefault",
		"secureEndpoint.tlsSecretName=netdrift-tls,extraArgs[0]=--stale-after=30s,priorityClassName=system-cluster-critical",
		"nodeCondition.enabled=true,nodeEvents.enabled=true,nodeReport.heartbeat=5m",
	} {
		args := []string{}
		if set != "" {
			args = append(args, "--set", set)
		}
		var chart []*unstructured.Unstructured
		for _, o := range objectsOf(t, renderChart(t, args...)) {
			if o.GroupVersionKind().Group != "monitoring.coreos.com" {
				chart = append(chart, o)
			}
		}
		t.Logf("chart values %q: %d objects dry-run", set, len(chart))
		apply(t, cfg, chart, true)
	}
	// Dry-run persisted nothing.
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.AppsV1().DaemonSets("netdrift").Get(context.Background(), "netdrift", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("DaemonSet exists after a dry run: %v", err)
	}
}

// The secure endpoint against the real API server, with the RBAC of daemonset.yaml: the
// middleware runs with the netdrift ServiceAccount's own token, so this also proves the
// ClusterRole lets the agent create TokenReviews and SubjectAccessReviews.
func TestLabSecureEndpointAuthnAuthz(t *testing.T) {
	cfg := startLab(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cfg)
	var rbac []*unstructured.Unstructured
	for _, o := range objects(t) {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			rbac = append(rbac, o)
		}
	}
	apply(t, cfg, rbac, false)

	const ns = "netdrift"
	token := func(sa string) string {
		t.Helper()
		if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	agentCfg := rest.AnonymousClientConfig(cfg)
	agentCfg.BearerToken = token("netdrift")
	agent := kubernetes.NewForConfigOrDie(agentCfg)

	scraper, stranger := token("scraper"), token("stranger")
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "netdrift-test-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "netdrift-test-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "netdrift-test-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	tlsCfg, err := authn.ServerTLSConfig(authn.TLSOptions{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	mw := authn.New(authn.Config{AuthzFailureTTL: time.Millisecond},
		agent.AuthenticationV1().TokenReviews(), agent.AuthorizationV1().SubjectAccessReviews())
	srv := httptest.NewUnstartedServer(mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := authn.UserFrom(r.Context())
		fmt.Fprintf(w, "metrics for %s", u.Name)
	})))
	srv.TLS = tlsCfg
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()

	get := func(path, tok string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// RBAC changes reach the API server's authorizer through its informers: allow a moment.
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body := get("/metrics", scraper)
		if code == 200 {
			if !strings.Contains(body, "system:serviceaccount:netdrift:scraper") {
				t.Errorf("200 body %q", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("token with RBAC: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, c := range []struct {
		name, path, token string
		code              int
	}{
		{"no token", "/metrics", "", 401},
		{"garbage token", "/metrics", "not-a-token", 401},
		{"token without RBAC", "/metrics", stranger, 403},
		{"token with RBAC for another path", "/v1/drift", scraper, 403},
		{"healthz open", "/healthz", "", 200},
		{"readyz open", "/readyz", "", 200},
	} {
		if code, body := get(c.path, c.token); code != c.code {
			t.Errorf("%s: %d %q, want %d", c.name, code, body, c.code)
		}
	}
}
