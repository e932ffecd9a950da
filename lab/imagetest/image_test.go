package imagetest

// TestImage: the agent's image (NETDRIFT_IMAGE, from make image) under podman + runc with
// the DaemonSet's settings as the chart renders them, in a lab node's network namespace,
// against the lab's real API server and kube-proxy. Run as root: make test-image.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/netdrift/netdrift/lab/labenv"
)

const (
	kubernetesServiceIP = "10.96.0.1" // the lab's first service IP (labenv)
	clusterDNS          = "10.96.0.10"
	runtimeDefault      = "/usr/share/containers/seccomp.json" // podman's and CRI-O's RuntimeDefault
)

// status is the subset of /v1/status the test reads.
type status struct {
	Node        string `json:"node"`
	Datapath    string `json:"datapath"`
	Ready       bool   `json:"ready"`
	ReadyReason string `json:"ready_reason"`
	Watch       struct {
		Synced  bool `json:"synced"`
		Healthy bool `json:"healthy"`
	} `json:"watch"`
	RSTProbe *struct {
		Up     bool   `json:"up"`
		Mode   string `json:"mode"`
		Reason string `json:"reason"`
	} `json:"rst_probe"`
}

type finding struct {
	Kind    string `json:"kind"`
	Service string `json:"service"`
	Backend string `json:"backend"`
}

type drift struct {
	Findings []finding `json:"findings"`
	Pending  []finding `json:"pending"`
}

func requirements(t *testing.T) (image, helm string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, the lab, podman")
	}
	image = os.Getenv("NETDRIFT_IMAGE")
	if image == "" {
		t.Skip("NETDRIFT_IMAGE unset: run make test-image (builds the image first)")
	}
	helm = os.Getenv("NETDRIFT_HELM")
	if helm == "" {
		t.Fatal("NETDRIFT_HELM unset: make test-image passes the helm it builds")
	}
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: apt-get install podman runc (make image-deps)", tool)
		}
	}
	if out, err := podman("image", "exists", image); err != nil {
		t.Fatalf("image %s not in podman's storage (make image): %v %s", image, err, out)
	}
	if _, err := os.Stat(runtimeDefault); err != nil {
		t.Fatalf("%s: podman's default seccomp profile is missing: %v", runtimeDefault, err)
	}
	return image, helm
}

func podman(args ...string) ([]byte, error) {
	cmd := exec.Command("podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+containersConf())
	return cmd.CombinedOutput()
}

func containersConf() string {
	if c := os.Getenv("CONTAINERS_CONF"); c != "" {
		return c
	}
	p, _ := filepath.Abs("../../mk/containers.conf")
	return p
}

// render renders the chart as the plain manifests are (deploy/helm/plain-values.yaml),
// with the kubelet's root directory in scratch.
func render(t *testing.T, helm, kubeletRoot string, set ...string) []byte {
	t.Helper()
	args := []string{"template", "netdrift", "../../deploy/helm/netdrift", "--namespace", "netdrift",
		"--kube-version", "1.37.2", "-f", "../../deploy/helm/plain-values.yaml",
		"--set", "seccompProfile.kubeletRootDir=" + kubeletRoot}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helm, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	return out
}

func decode(t *testing.T, manifest []byte) (objs []*unstructured.Unstructured, ds *appsv1.DaemonSet, cms map[string]map[string]string) {
	t.Helper()
	cms = map[string]map[string]string{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
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
		switch u.GetKind() {
		case "DaemonSet":
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(js, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			ds = obj.(*appsv1.DaemonSet)
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
				t.Fatal(err)
			}
			cms[cm.Name] = cm.Data
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet in the rendered chart")
	}
	return objs, ds, cms
}

// apply creates the objects the agent's pod relies on: namespace, ServiceAccount, RBAC and
// the seccomp ConfigMap. Not the DaemonSet (its pod is what this test runs) nor the
// Prometheus Operator objects (no CRDs in the lab).
func apply(t *testing.T, cfg *rest.Config, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubernetes.NewForConfigOrDie(cfg).Discovery()))
	for _, o := range objs {
		switch o.GetKind() {
		case "DaemonSet", "ServiceMonitor", "PrometheusRule":
			continue
		}
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk.Kind, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if o.GetNamespace() != "" {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "netdrift-image-test", Force: true}); err != nil {
			t.Fatalf("apply %s %s: %v", gvk.Kind, o.GetName(), err)
		}
	}
}

func TestImage(t *testing.T) {
	image, helm := requirements(t)
	start := time.Now()
	ctx := context.Background()
	cgroups := cgroupDirs()
	t.Cleanup(func() {
		if r := removeNewCgroups(cgroups); len(r) > 0 {
			t.Logf("removed %d empty cgroup directories podman left", len(r))
		}
	})
	scratch := t.TempDir()
	kubeletRoot := filepath.Join(scratch, "kubelet")

	manifest := render(t, helm, kubeletRoot)
	objs, ds, cms := decode(t, manifest)

	// A one-node lab (iptables kube-proxy) of our own: a name no other test uses.
	name := fmt.Sprintf("img%d", os.Getpid()%100000)
	l, err := labenv.Start(ctx, labenv.Options{Name: name, Nodes: 1, ProxyMode: "iptables", Logf: t.Logf})
	if err != nil {
		t.Fatalf("lab: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Stop(); err != nil {
			t.Errorf("lab stop: %v", err)
		}
	})
	t.Logf("lab %s up in %s", name, l.UpTook().Round(time.Second))
	node := l.Nodes()[0]
	cfg := l.RESTConfig()
	apply(t, cfg, objs)
	admin := l.Clientset()

	// The ServiceAccount token as the kubelet mounts it: TokenRequest (bound, expiring),
	// the cluster CA and the namespace, at /var/run/secrets/kubernetes.io/serviceaccount.
	saDir := filepath.Join(scratch, "serviceaccount")
	if err := os.MkdirAll(saDir, 0o755); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ds.Namespace).CreateToken(ctx, ds.Spec.Template.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	ca := cfg.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	for f, b := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte(ds.Namespace)} {
		if err := os.WriteFile(filepath.Join(saDir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	pod, err := Translate(ds, Env{
		Image: image, Node: node.Name, NetNSPath: "/run/netns/" + node.NetNS, SADir: saDir,
		ServiceHost: kubernetesServiceIP, ClusterDNS: clusterDNS, ConfigMaps: cms, Scratch: scratch,
		Seccomp: filepath.Join(kubeletRoot, "seccomp"), RuntimeDefault: runtimeDefault,
	})
	if err != nil {
		t.Fatalf("the manifest's pod cannot be run as written: %v", err)
	}
	for _, s := range pod.Ignored {
		t.Logf("not a runtime setting: %s", s)
	}

	// Init containers to completion, then the agent.
	run := func(c Container, detach bool) string {
		t.Helper()
		cname := fmt.Sprintf("netdrift-imagetest-%s-%s", name, c.Name)
		if c.Name == "agent" && strings.Contains(strings.Join(c.Args, " "), "seccomp="+runtimeDefault) {
			cname += "-runtimedefault"
		}
		args := append([]string{"run", "--name", cname, "--runtime", "runc"}, c.Args...)
		if detach {
			args = append([]string{"run", "-d", "--name", cname, "--runtime", "runc"}, c.Args...)
		}
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := podman("logs", cname)
				t.Logf("podman logs %s:\n%s", cname, out)
			}
			if out, err := podman("rm", "-f", "-t", fmt.Sprint(c.StopTimeout), cname); err != nil {
				t.Errorf("podman rm %s: %v %s", cname, err, out)
			}
		})
		t.Logf("podman %s", strings.Join(args, " "))
		out, err := podman(args...)
		if err != nil {
			t.Fatalf("podman run %s: %v\n%s", c.Name, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, c := range pod.Init {
		run(c, false)
	}
	if len(pod.Main) != 1 {
		t.Fatalf("%d containers, want the agent only", len(pod.Main))
	}
	agent := pod.Main[0]
	if len(pod.Init) > 0 {
		if _, err := os.Stat(filepath.Join(kubeletRoot, "seccomp", "netdrift", "agent.json")); err != nil {
			t.Fatalf("the init container did not install the seccomp profile: %v", err)
		}
	}
	run(agent, true)

	// Probes as the kubelet sends them: to the pod IP (hostNetwork: the node's IP).
	httpc, err := l.HTTPClient(node.Name)
	if err != nil {
		t.Fatal(err)
	}
	tlsc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     func(ctx context.Context, n, a string) (net.Conn, error) { return l.DialContext(ctx, node.Name, n, a) },
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the agent's self-signed certificate
	}}
	probe := func(p *corev1.Probe) (int, error) {
		g := p.HTTPGet
		host := g.Host
		if host == "" {
			host = node.IP
		}
		port := g.Port.IntValue()
		if port == 0 {
			for _, cp := range agent.Ports {
				if cp.Name == g.Port.String() {
					port = int(cp.ContainerPort)
				}
			}
		}
		scheme := strings.ToLower(string(g.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		client := httpc
		if scheme == "https" {
			client = tlsc
		}
		resp, err := client.Get(fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, fmt.Sprint(port)), g.Path))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	local := "http://" + localListen(t, agent)
	getJSON := func(path string, v any) error {
		resp, err := httpc.Get(local + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
		return yaml.Unmarshal(b, v)
	}

	var st status
	eventually(t, 90*time.Second, "agent ready (readinessProbe)", func() (bool, string) {
		code, err := probe(agent.Readiness)
		if err != nil || code != 200 {
			_ = getJSON("/v1/status", &st)
			return false, fmt.Sprintf("readiness %d %v; status %+v", code, err, st)
		}
		return true, ""
	})
	readyAfter := time.Since(start)
	if code, err := probe(agent.Liveness); err != nil || code != 200 {
		t.Errorf("livenessProbe: %d %v", code, err)
	}
	if err := getJSON("/v1/status", &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("/v1/status: node %s datapath %s ready %v watch %+v rst_probe %+v", st.Node, st.Datapath, st.Ready, st.Watch, st.RSTProbe)
	if st.Node != node.Name || !st.Ready || !st.Watch.Synced || !st.Watch.Healthy {
		t.Errorf("status %+v", st)
	}
	if st.Datapath != "iptables" {
		t.Errorf("datapath %q, want iptables (kube-proxy's mode)", st.Datapath)
	}
	if st.RSTProbe == nil || !st.RSTProbe.Up {
		t.Errorf("RST probe not up under the manifest's seccomp profile: %+v", st.RSTProbe)
	}

	// A Service with two pods; kube-proxy frozen; one pod deleted: its rule stays behind.
	sel := map[string]string{"app": "imgt"}
	svc, err := l.CreateService(ctx, labenv.ServiceSpec{Name: "imgt", Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var backends []string
	var victim string
	for i := 1; i <= 2; i++ {
		pn := fmt.Sprintf("imgt-%d", i)
		if _, err := l.CreatePod(ctx, labenv.PodSpec{Name: pn, Node: node.Name, Labels: sel}); err != nil {
			t.Fatal(err)
		}
		p, err := l.WaitPodRunning(ctx, "default", pn, 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		b := net.JoinHostPort(p.Status.PodIP, fmt.Sprint(labenv.DefaultPodPort))
		backends = append(backends, b)
		if i == 1 {
			victim = b
		}
	}
	eventually(t, 60*time.Second, "kube-proxy programs imgt", func() (bool, string) {
		got, err := l.ProgrammedBackends(node.Name, svc.Spec.ClusterIP, 80)
		return err == nil && len(got) == 2, fmt.Sprintf("%v %v", got, err)
	})
	eventually(t, 30*time.Second, "no findings for default/imgt before the freeze", func() (bool, string) {
		var d drift
		if err := getJSON("/v1/drift", &d); err != nil {
			return false, err.Error()
		}
		for _, f := range append(d.Findings, d.Pending...) {
			if f.Service == "default/imgt" {
				return false, fmt.Sprintf("%+v", d)
			}
		}
		return true, ""
	})
	if err := l.FreezeKubeProxy(node.Name); err != nil {
		t.Fatal(err)
	}
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_ = l.ThawKubeProxy(node.Name)
		}
	})
	if err := l.DeletePod(ctx, "default", "imgt-1", ptr.To[int64](0)); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	eventually(t, 60*time.Second, "stale_backend "+victim, func() (bool, string) {
		var d drift
		if err := getJSON("/v1/drift", &d); err != nil {
			return false, err.Error()
		}
		for _, f := range d.Findings {
			if f.Kind == "stale_backend" && f.Service == "default/imgt" && f.Backend == victim {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", d)
	})
	t.Logf("stale_backend %s reported %s after the delete (kube-proxy frozen)", victim, time.Since(deleted).Round(time.Millisecond))
	if err := l.ThawKubeProxy(node.Name); err != nil {
		t.Fatal(err)
	}
	thawed = true

	// The secure endpoint: 401 without a valid token, 403 without RBAC, 200 with it.
	secure := fmt.Sprintf("https://%s", net.JoinHostPort(node.IP, fmt.Sprint(securePort(t, agent))))
	token := func(sa string) string {
		if _, err := admin.CoreV1().ServiceAccounts(ds.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		tr, err := admin.CoreV1().ServiceAccounts(ds.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, stranger := token("imgt-scraper"), token("imgt-stranger")
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "netdrift-imgt-metrics"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "netdrift-imgt-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "netdrift-imgt-metrics"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "imgt-scraper", Namespace: ds.Namespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func(path, tok string) (int, string) {
		req, _ := http.NewRequest("GET", secure+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := tlsc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The agent caches a rejection for a while and the API server's authorizer learns RBAC
	// through informers: the scraper asks first, until allowed.
	eventually(t, 30*time.Second, "GET /metrics with a token bound to /metrics", func() (bool, string) {
		code, body := get("/metrics", scraper)
		return code == 200 && strings.Contains(body, "netdrift_build_info"), fmt.Sprintf("%d %.200s", code, body)
	})
	for _, c := range []struct {
		what, path, token string
		want              int
	}{
		{"no token", "/metrics", "", 401},
		{"not a token", "/metrics", "not-a-token", 401},
		{"a token without RBAC", "/metrics", stranger, 403},
		{"a token for another path", "/v1/drift", scraper, 403},
		{"with RBAC", "/metrics", scraper, 200},
	} {
		if code, body := get(c.path, c.token); code != c.want {
			t.Errorf("secure endpoint, %s: %d %.200q, want %d", c.what, code, body, c.want)
		} else {
			t.Logf("secure endpoint, %s: %d", c.what, code)
		}
	}

	// The same agent with seccompProfile.type=RuntimeDefault: under podman's (and CRI-O's)
	// default profile bpf() is refused without CAP_SYS_ADMIN, so the probe stays down while
	// the agent itself works. This is why the chart ships the Localhost profile.
	if out, err := podman("rm", "-f", "-t", fmt.Sprint(agent.StopTimeout), fmt.Sprintf("netdrift-imagetest-%s-agent", name)); err != nil {
		t.Fatalf("podman rm: %v %s", err, out)
	}
	_, rdDS, _ := decode(t, render(t, helm, kubeletRoot, "seccompProfile.type=RuntimeDefault"))
	rd, err := Translate(rdDS, Env{
		Image: image, Node: node.Name, NetNSPath: "/run/netns/" + node.NetNS, SADir: saDir,
		ServiceHost: kubernetesServiceIP, ClusterDNS: clusterDNS, ConfigMaps: cms, Scratch: scratch,
		Seccomp: filepath.Join(kubeletRoot, "seccomp"), RuntimeDefault: runtimeDefault,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rd.Init) != 0 || len(rd.Main) != 1 {
		t.Fatalf("RuntimeDefault: %d init containers, %d containers", len(rd.Init), len(rd.Main))
	}
	run(rd.Main[0], true)
	eventually(t, 90*time.Second, "RuntimeDefault: agent ready, probe state known", func() (bool, string) {
		st = status{}
		err := getJSON("/v1/status", &st)
		return err == nil && st.Ready && st.RSTProbe != nil, fmt.Sprintf("%v %+v", err, st)
	})
	t.Logf("RuntimeDefault (%s): rst_probe %+v", runtimeDefault, st.RSTProbe)
	if st.RSTProbe.Up || !strings.Contains(st.RSTProbe.Reason, "operation not permitted") {
		t.Errorf("under %s the probe was expected down with EPERM from bpf(): %+v", runtimeDefault, st.RSTProbe)
	}
	t.Logf("image %s: ready %s after the test started, whole test %s", image, readyAfter.Round(time.Second), time.Since(start).Round(time.Second))
}

// localListen is the agent's --listen address (the plain local API).
func localListen(t *testing.T, c Container) string {
	t.Helper()
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--listen="); ok {
			return v
		}
	}
	t.Fatal("the agent has no --listen")
	return ""
}

func securePort(t *testing.T, c Container) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == "https-metrics" {
			return p.ContainerPort
		}
	}
	t.Fatal("the agent has no https-metrics port")
	return 0
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, msg)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
