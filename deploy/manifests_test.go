package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// serviceMonitor mirrors the fields of monitoring.coreos.com/v1 ServiceMonitor that the
// manifest uses; decoded strictly, so a misspelt field fails here.
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port            string `json:"port"`
			Path            string `json:"path"`
			Scheme          string `json:"scheme"`
			Interval        string `json:"interval"`
			HonorLabels     bool   `json:"honorLabels"`
			BearerTokenFile string `json:"bearerTokenFile"`
			TLSConfig       struct {
				InsecureSkipVerify bool `json:"insecureSkipVerify"`
			} `json:"tlsConfig"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels,omitempty"`
				TargetLabel  string   `json:"targetLabel,omitempty"`
				Action       string   `json:"action,omitempty"`
				Regex        string   `json:"regex,omitempty"`
			} `json:"relabelings"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type manifests struct {
	namespace      *corev1.Namespace
	serviceAccount *corev1.ServiceAccount
	clusterRole    *rbacv1.ClusterRole
	clusterReader  *rbacv1.ClusterRole // the responders' cluster commands
	crb            *rbacv1.ClusterRoleBinding
	role           *rbacv1.Role // the agent's (node leases)
	responder      *rbacv1.Role // responder-rbac.yaml: kubectl netdrift --node
	roleBinding    *rbacv1.RoleBinding
	ds             *appsv1.DaemonSet
	svc            *corev1.Service
	sm             *serviceMonitor
	seccomp        *corev1.ConfigMap // the Localhost seccomp profile the init container installs
	crd            map[string]any    // the NodeReport CRD (crd_test.go checks it)
	policies       []*admissionregistrationv1.ValidatingAdmissionPolicy
	bindings       []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// loadManifests decodes every document of daemonset.yaml into its typed object, strictly
// (unknown or duplicate fields are errors), and fails on kinds it does not expect.
func loadManifests(t *testing.T) manifests {
	t.Helper()
	codecs := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)
	dec := codecs.UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(readFile(t, manifestFile))))
	var m manifests
	seen := map[string]int{}
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if string(js) == "null" {
			continue // comments only
		}
		var tm struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(js, &tm); err != nil {
			t.Fatal(err)
		}
		seen[tm.Kind]++
		if tm.APIVersion == "monitoring.coreos.com/v1" {
			m.sm = &serviceMonitor{}
			if err := yaml.UnmarshalStrict(doc, m.sm); err != nil {
				t.Fatalf("%s: %v", tm.Kind, err)
			}
			continue
		}
		if tm.Kind == "CustomResourceDefinition" {
			if err := yaml.Unmarshal(js, &m.crd); err != nil {
				t.Fatalf("%s: %v", tm.Kind, err)
			}
			continue
		}
		obj, _, err := dec.Decode(js, nil, nil)
		if err != nil {
			t.Fatalf("document %d (%s): %v", i, tm.Kind, err)
		}
		m.assign(t, obj)
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "DaemonSet", "Service", "ServiceMonitor",
		"CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		want := 1
		if k == "Role" || k == "ClusterRole" {
			want = 2 // the agent's and the responders'
		}
		if seen[k] != want {
			t.Errorf("%d %s objects, want %d", seen[k], k, want)
		}
	}
	if len(seen) != 13 {
		t.Errorf("kinds %v, want exactly the thirteen above", sortedKeys(seen))
	}
	return m
}

func (m *manifests) assign(t *testing.T, obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Namespace:
		m.namespace = o
	case *corev1.ServiceAccount:
		m.serviceAccount = o
	case *rbacv1.ClusterRole:
		if strings.HasSuffix(o.Name, "-cluster-reader") {
			m.clusterReader = o
		} else {
			m.clusterRole = o
		}
	case *rbacv1.ClusterRoleBinding:
		m.crb = o
	case *rbacv1.Role:
		if strings.HasSuffix(o.Name, "-responder") {
			m.responder = o
		} else {
			m.role = o
		}
	case *rbacv1.RoleBinding:
		m.roleBinding = o
	case *appsv1.DaemonSet:
		m.ds = o
	case *corev1.Service:
		m.svc = o
	case *corev1.ConfigMap:
		m.seccomp = o
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		m.policies = append(m.policies, o)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		m.bindings = append(m.bindings, o)
	default:
		t.Errorf("unexpected object %T", obj)
	}
}

// permission is one (scope, apiGroup, resource, verb) the agent is granted.
type permission struct{ scope, group, resource, verb string }

func permissions(t *testing.T, scope string, rules []rbacv1.PolicyRule) []permission {
	var ps []permission
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("%s: rule %+v uses resourceNames/nonResourceURLs", scope, r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" || strings.Contains(res, "/") {
						t.Errorf("%s: wildcard or subresource in %+v", scope, r)
					}
					ps = append(ps, permission{scope, g, res, v})
				}
			}
		}
	}
	return ps
}

// The agent gets exactly what the issue allows, and nothing else.
func TestRBACIsExactlyTheAllowedSet(t *testing.T) {
	m := loadManifests(t)
	var want []permission
	for _, gr := range [][2]string{{"", "services"}, {"discovery.k8s.io", "endpointslices"}, {"", "nodes"}, {"", "pods"}} {
		for _, v := range []string{"get", "list", "watch"} {
			want = append(want, permission{"cluster", gr[0], gr[1], v})
		}
	}
	for _, v := range []string{"get", "list", "watch"} {
		want = append(want, permission{"kube-node-lease", "coordination.k8s.io", "leases", v})
	}
	want = append(want,
		permission{"cluster", "authentication.k8s.io", "tokenreviews", "create"},
		permission{"cluster", "authorization.k8s.io", "subjectaccessreviews", "create"})
	for _, v := range []string{"get", "create", "patch", "update"} { // the node's own NodeReport (node_restriction_test.go)
		want = append(want, permission{"cluster", "netdrift.io", "nodereports", v})
	}

	got := append(permissions(t, "cluster", m.clusterRole.Rules), permissions(t, m.role.Namespace, m.role.Rules)...)
	less := func(a, b permission) int {
		return strings.Compare(a.scope+a.group+a.resource+a.verb, b.scope+b.group+b.resource+b.verb)
	}
	slices.SortFunc(got, less)
	slices.SortFunc(want, less)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RBAC permissions\n got %v\nwant %v", got, want)
	}
	if m.role.Namespace != "kube-node-lease" || m.roleBinding.Namespace != "kube-node-lease" {
		t.Errorf("lease Role/RoleBinding in %q/%q, want kube-node-lease", m.role.Namespace, m.roleBinding.Namespace)
	}
	sa := rbacv1.Subject{Kind: "ServiceAccount", Name: m.serviceAccount.Name, Namespace: m.serviceAccount.Namespace}
	for _, b := range []struct {
		name     string
		ref      rbacv1.RoleRef
		subjects []rbacv1.Subject
		wantRef  rbacv1.RoleRef
	}{
		{"ClusterRoleBinding", m.crb.RoleRef, m.crb.Subjects, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: m.clusterRole.Name}},
		{"RoleBinding", m.roleBinding.RoleRef, m.roleBinding.Subjects, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: m.role.Name}},
	} {
		if b.ref != b.wantRef {
			t.Errorf("%s roleRef %+v, want %+v", b.name, b.ref, b.wantRef)
		}
		if !reflect.DeepEqual(b.subjects, []rbacv1.Subject{sa}) {
			t.Errorf("%s subjects %+v, want only %+v", b.name, b.subjects, sa)
		}
	}
	if m.serviceAccount.Namespace != m.namespace.Name || m.ds.Spec.Template.Spec.ServiceAccountName != m.serviceAccount.Name {
		t.Error("DaemonSet does not run as the bound ServiceAccount in the netdrift namespace")
	}
}

// wantCaps are the capabilities the agent needs; capabilities_test.go proves each is
// needed and enough for the tools the agent runs.
var wantCaps = []string{"BPF", "NET_ADMIN", "NET_RAW", "PERFMON"}

func TestDaemonSetPodSpec(t *testing.T) {
	m := loadManifests(t)
	ds := m.ds
	ps := ds.Spec.Template.Spec
	if ds.Namespace != m.namespace.Name {
		t.Errorf("DaemonSet in %q", ds.Namespace)
	}
	if !ps.HostNetwork || ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v dnsPolicy %q", ps.HostNetwork, ps.DNSPolicy)
	}
	if ps.HostPID || ps.HostIPC {
		t.Error("hostPID/hostIPC are not needed")
	}
	if !reflect.DeepEqual(ps.Tolerations, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}) {
		t.Errorf("tolerations %+v, want one that tolerates every taint", ps.Tolerations)
	}
	if ps.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q", ps.PriorityClassName)
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod template", k, v)
		}
	}
	if ps.SecurityContext == nil || ps.SecurityContext.SeccompProfile == nil || ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("the pod's seccomp profile (the init container's) is not RuntimeDefault")
	}
	if len(ps.Containers) != 1 || len(ps.InitContainers) != 1 {
		t.Fatalf("%d containers, %d init containers; want 1, 1 (the seccomp profile installer)", len(ps.Containers), len(ps.InitContainers))
	}
	c := ps.Containers[0]
	// The agent's own seccomp profile: Localhost, the ConfigMap's, installed by the init container.
	if p := c.SecurityContext.SeccompProfile; p == nil || p.Type != corev1.SeccompProfileTypeLocalhost || p.LocalhostProfile == nil || *p.LocalhostProfile != "netdrift/agent.json" {
		t.Errorf("agent seccomp profile %+v, want Localhost netdrift/agent.json", p)
	}
	if m.seccomp.Data["agent.json"] != string(readFile(t, localhostProfileFile)) {
		t.Errorf("ConfigMap %s does not carry %s", m.seccomp.Name, localhostProfileFile)
	}
	checkInitContainer(t, ps, ps.InitContainers[0], m.seccomp.Name)
	wantArgs := []string{"agent", "--node-name=$(NODE_NAME)", "--listen=127.0.0.1:9760", "--secure-listen=:9761"}
	if !reflect.DeepEqual(c.Args, wantArgs) || len(c.Command) != 0 {
		t.Errorf("command %v args %v, want the image's entrypoint with %v", c.Command, c.Args, wantArgs)
	}
	if !hasNodeNameEnv(c.Env) {
		t.Error("NODE_NAME is not taken from spec.nodeName")
	}
	checkSecurityContext(t, c.SecurityContext)
	checkProbes(t, c)
	checkResources(t, c.Resources)
	checkVolumes(t, ps, c)
}

func hasNodeNameEnv(env []corev1.EnvVar) bool {
	for _, e := range env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			return true
		}
	}
	return false
}

func checkSecurityContext(t *testing.T, sc *corev1.SecurityContext) {
	t.Helper()
	if sc == nil {
		t.Fatal("no container securityContext")
	}
	if sc.Privileged == nil || *sc.Privileged {
		t.Error("privileged must be explicitly false")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem must be true")
	}
	if sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Fatal("capabilities must drop ALL")
	}
	var add []string
	for _, c := range sc.Capabilities.Add {
		add = append(add, string(c))
	}
	sort.Strings(add)
	if !reflect.DeepEqual(add, wantCaps) {
		t.Errorf("capabilities add %v, want %v", add, wantCaps)
	}
}

// Every requested capability is named with its reason in a comment of the manifest.
func TestEveryCapabilityIsExplained(t *testing.T) {
	text := string(readFile(t, manifestFile))
	for _, c := range wantCaps {
		if !strings.Contains(text, "# "+c+": ") {
			t.Errorf("no '# %s: <why>' comment in %s", c, manifestFile)
		}
	}
}

func checkProbes(t *testing.T, c corev1.Container) {
	t.Helper()
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no httpGet probe for %s", name)
			continue
		}
		g := p.HTTPGet
		if g.Path != name || g.Port.String() != "https-metrics" || g.Scheme != corev1.URISchemeHTTPS || g.Host != "" {
			t.Errorf("probe %s: %+v", name, g)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "https-metrics" || c.Ports[0].ContainerPort != 9761 {
		t.Errorf("ports %+v, want https-metrics 9761 (the secure listener)", c.Ports)
	}
}

func checkResources(t *testing.T, r corev1.ResourceRequirements) {
	t.Helper()
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := r.Requests[res]
		lim, okLim := r.Limits[res]
		if !okReq || !okLim {
			t.Errorf("%s: request and limit both required", res)
			continue
		}
		if req.Cmp(lim) > 0 {
			t.Errorf("%s: request %s above limit %s", res, req.String(), lim.String())
		}
	}
}

const kubeletSeccompDir = "/var/lib/kubelet/seccomp/netdrift"

// Host mounts of the agent: only tracefs, read-only.
func checkVolumes(t *testing.T, ps corev1.PodSpec, c corev1.Container) {
	t.Helper()
	allowed := map[string]bool{"/sys/kernel/tracing": true, kubeletSeccompDir: true}
	host := map[string]string{}
	for _, v := range ps.Volumes {
		if v.HostPath == nil {
			continue
		}
		if !allowed[v.HostPath.Path] {
			t.Errorf("host mount %s is not needed", v.HostPath.Path)
		}
		host[v.Name] = v.HostPath.Path
	}
	for _, vm := range c.VolumeMounts {
		if p, ok := host[vm.Name]; ok && (!vm.ReadOnly || p == kubeletSeccompDir) {
			t.Errorf("agent: host mount %s (%s) is writable or not the agent's", vm.MountPath, p)
		}
	}
}

// The init container: no capabilities, read-only root, writes only the kubelet's
// seccomp/netdrift directory, reads the profile from the ConfigMap.
func checkInitContainer(t *testing.T, ps corev1.PodSpec, c corev1.Container, configMap string) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("init container %s: capabilities %+v, want none", c.Name, sc)
		return
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Privileged == nil || *sc.Privileged || sc.SeccompProfile != nil {
		t.Errorf("init container %s: securityContext %+v", c.Name, sc)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		vols[v.Name] = v
	}
	var wrote, read bool
	for _, vm := range c.VolumeMounts {
		v := vols[vm.Name]
		switch {
		case v.HostPath != nil && v.HostPath.Path == kubeletSeccompDir && vm.MountPath == "/host":
			wrote = true
		case v.ConfigMap != nil && v.ConfigMap.Name == configMap && vm.ReadOnly && vm.MountPath == "/profile":
			read = true
		default:
			t.Errorf("init container %s: mount %+v of %+v", c.Name, vm, v.VolumeSource)
		}
	}
	if !wrote || !read {
		t.Errorf("init container %s: writes the kubelet's seccomp dir %v, reads the ConfigMap %v", c.Name, wrote, read)
	}
	if got := strings.Join(c.Command, " "); !strings.Contains(got, "/profile/agent.json") || !strings.Contains(got, "/host/agent.json") {
		t.Errorf("init container %s: command %q", c.Name, got)
	}
}

func TestServiceAndServiceMonitor(t *testing.T) {
	m := loadManifests(t)
	svc, sm, pod := m.svc, m.sm, m.ds.Spec.Template
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service clusterIP %q, want None (headless)", svc.Spec.ClusterIP)
	}
	for k, v := range svc.Spec.Selector {
		if pod.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not select the agent pods", k, v)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9761 || svc.Spec.Ports[0].TargetPort.String() != "https-metrics" {
		t.Errorf("Service ports %+v", svc.Spec.Ports)
	}
	if sm.Metadata.Namespace != svc.Namespace || !slices.Contains(sm.Spec.NamespaceSelector.MatchNames, svc.Namespace) {
		t.Error("ServiceMonitor does not look in the Service's namespace")
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selector %s=%s does not select the Service", k, v)
		}
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d ServiceMonitor endpoints", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != svc.Spec.Ports[0].Name || ep.Scheme != "https" || ep.Path != "/metrics" || ep.BearerTokenFile == "" {
		t.Errorf("ServiceMonitor endpoint %+v", ep)
	}
	if !ep.HonorLabels {
		t.Error("honorLabels must be true: the agent's namespace/service labels name the audited Service")
	}
	var node bool
	for _, r := range ep.Relabelings {
		node = node || (r.TargetLabel == "node" && slices.Equal(r.SourceLabels, []string{"__meta_kubernetes_pod_node_name"}))
	}
	if !node {
		t.Error("ServiceMonitor does not set the node label the alerts and dashboard use")
	}
	// The alert rules select up{job="netdrift"}; Prometheus Operator names the job after the Service.
	for _, a := range alerts(loadRules(t)) {
		if strings.Contains(a.Expr, "job=") && !strings.Contains(a.Expr, `job="`+svc.Name+`"`) {
			t.Errorf("%s selects a job other than %q", a.Alert, svc.Name)
		}
	}
	if m.namespace.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Error("namespace must allow hostNetwork and capabilities (Pod Security privileged)")
	}
}
