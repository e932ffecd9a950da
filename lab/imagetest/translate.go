// Package imagetest runs the agent's container image under a real OCI runtime (podman with
// runc) with the settings of the DaemonSet as the chart renders it, in a lab node's network
// namespace, against the lab's real API server and kube-proxy (make test-image).
//
// translate.go turns the rendered pod template into podman arguments, as a kubelet and a CRI
// runtime would. Every field of the pod and container specs is either translated or named
// here as one that only the scheduler or the kubelet acts on; anything else is an error, so
// a new manifest setting cannot be silently left out of the test.
package imagetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Env is what the kubelet knows and the manifest does not.
type Env struct {
	Image       string // the image built by make image (replaces the manifest's reference)
	Node        string // spec.nodeName
	NetNSPath   string // the node's network namespace (hostNetwork: true)
	SADir       string // token, ca.crt, namespace (the projected service-account volume)
	ServiceHost string // the kubernetes Service's ClusterIP (KUBERNETES_SERVICE_HOST)
	ClusterDNS  string // the kubelet's clusterDNS (dnsPolicy ClusterFirstWithHostNet)
	// ConfigMaps by name: key -> content, for configMap volumes.
	ConfigMaps map[string]map[string]string
	// Scratch holds the files made for configMap volumes.
	Scratch string
	// Seccomp is the kubelet's seccomp directory (<root-dir>/seccomp) for Localhost profiles.
	Seccomp string
	// RuntimeDefault is the runtime's default profile file (podman, CRI-O: containers-common).
	RuntimeDefault string
}

// Container is one container's podman command line.
type Container struct {
	Name string
	Args []string // after "podman run"
	// Probes the test runs itself (kubelet probes), by kind.
	Readiness, Liveness *corev1.Probe
	// Ports the container serves (hostNetwork: on the node's addresses).
	Ports []corev1.ContainerPort
	// StopTimeout is terminationGracePeriodSeconds.
	StopTimeout int64
	// Ignored: this container's settings that only the scheduler or kubelet act on.
	Ignored []string
}

// Pod is the translated pod template: init containers run to completion first.
type Pod struct {
	Init, Main []Container
	// Ignored lists the settings acted on by the scheduler or the kubelet only, with why.
	Ignored []string
}

// Translate translates ds's pod template. Settings it does not know are an error.
func Translate(ds *appsv1.DaemonSet, env Env) (*Pod, error) {
	spec := ds.Spec.Template.Spec.DeepCopy()
	out := &Pod{}
	ignore := func(what, why string) { out.Ignored = append(out.Ignored, what+": "+why) }

	var podArgs []string
	if !spec.HostNetwork {
		return nil, fmt.Errorf("hostNetwork false: the test runs the agent in a node's network namespace only")
	}
	podArgs = append(podArgs, "--network", "ns:"+env.NetNSPath, "--uts", "host")
	spec.HostNetwork = false
	switch spec.DNSPolicy {
	case corev1.DNSClusterFirstWithHostNet:
		// The kubelet writes its clusterDNS into the pod's resolv.conf.
		podArgs = append(podArgs, "--dns", env.ClusterDNS, "--dns-search", ds.Namespace+".svc.cluster.local",
			"--dns-search", "svc.cluster.local", "--dns-search", "cluster.local", "--dns-option", "ndots:5")
	default:
		return nil, fmt.Errorf("dnsPolicy %q not translated", spec.DNSPolicy)
	}
	spec.DNSPolicy = ""

	if spec.AutomountServiceAccountToken == nil || !*spec.AutomountServiceAccountToken || spec.ServiceAccountName == "" {
		return nil, fmt.Errorf("the agent needs its ServiceAccount token mounted (automountServiceAccountToken, serviceAccountName)")
	}
	saMount := []string{"-v", env.SADir + ":/var/run/secrets/kubernetes.io/serviceaccount:ro"}
	// The kubelet's service environment for the kubernetes Service (headless Services get none).
	svcEnv := []string{
		"KUBERNETES_SERVICE_HOST=" + env.ServiceHost, "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT_HTTPS=443",
		"KUBERNETES_PORT=tcp://" + env.ServiceHost + ":443", "KUBERNETES_PORT_443_TCP=tcp://" + env.ServiceHost + ":443",
		"KUBERNETES_PORT_443_TCP_PROTO=tcp", "KUBERNETES_PORT_443_TCP_PORT=443", "KUBERNETES_PORT_443_TCP_ADDR=" + env.ServiceHost,
	}
	spec.AutomountServiceAccountToken, spec.ServiceAccountName = nil, ""

	podSeccomp := ""
	if sc := spec.SecurityContext; sc != nil {
		if sc.SeccompProfile != nil {
			p, err := seccompArg(sc.SeccompProfile, env)
			if err != nil {
				return nil, fmt.Errorf("pod seccompProfile: %w", err)
			}
			podSeccomp = p
			sc.SeccompProfile = nil
		}
		if !reflect.ValueOf(*sc).IsZero() {
			return nil, fmt.Errorf("pod securityContext fields not translated: %s", js(sc))
		}
		spec.SecurityContext = nil
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	spec.Volumes = nil

	grace := int64(30)
	if spec.TerminationGracePeriodSeconds != nil {
		grace = *spec.TerminationGracePeriodSeconds
		spec.TerminationGracePeriodSeconds = nil
	}

	if len(spec.Tolerations) > 0 {
		ignore("tolerations", "scheduling")
		spec.Tolerations = nil
	}
	if spec.PriorityClassName != "" {
		ignore("priorityClassName", "scheduling and eviction order")
		spec.PriorityClassName = ""
	}
	if len(spec.NodeSelector) > 0 {
		ignore("nodeSelector", "scheduling")
		spec.NodeSelector = nil
	}
	if spec.Affinity != nil {
		ignore("affinity", "scheduling")
		spec.Affinity = nil
	}
	if len(spec.ImagePullSecrets) > 0 {
		ignore("imagePullSecrets", "the image is local")
		spec.ImagePullSecrets = nil
	}
	// Defaults the API server would fill in are not in a rendered manifest; anything else is.
	inits, mains := spec.InitContainers, spec.Containers
	spec.InitContainers, spec.Containers = nil, nil
	if !reflect.ValueOf(*spec).IsZero() {
		return nil, fmt.Errorf("pod spec fields not translated: %s", js(spec))
	}

	for i, list := range [][]corev1.Container{inits, mains} {
		for _, c := range list {
			tc, err := translateContainer(c, env, volumes, podSeccomp, grace)
			if err != nil {
				return nil, fmt.Errorf("container %s: %w", c.Name, err)
			}
			tc.Args = slices.Concat(podArgs, saMount, prefix("-e", svcEnv), tc.Args)
			for _, s := range tc.Ignored {
				ignore(c.Name+": "+strings.SplitN(s, ":", 2)[0], strings.TrimSpace(strings.SplitN(s, ":", 2)[1]))
			}
			if i == 0 {
				out.Init = append(out.Init, *tc)
			} else {
				out.Main = append(out.Main, *tc)
			}
		}
	}
	return out, nil
}

func translateContainer(c corev1.Container, env Env, volumes map[string]corev1.Volume, podSeccomp string, grace int64) (*Container, error) {
	tc := &Container{Name: c.Name, StopTimeout: grace}
	if _, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
		tc.Ignored = append(tc.Ignored, "resources.requests.memory: scheduling and eviction only")
	}
	var a []string
	c.Name = ""
	if c.Image == "" {
		return nil, fmt.Errorf("no image")
	}
	c.Image = "" // replaced by env.Image: what make image built
	switch c.ImagePullPolicy {
	case corev1.PullIfNotPresent, corev1.PullNever:
		a = append(a, "--pull", "never")
	default:
		return nil, fmt.Errorf("imagePullPolicy %q: the test has no registry", c.ImagePullPolicy)
	}
	c.ImagePullPolicy = ""

	// Environment, resolved like the kubelet: fieldRef, resourceFieldRef, values.
	vars := map[string]string{}
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = expand(e.Value, vars)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			v = env.Node
		case e.ValueFrom.ResourceFieldRef != nil:
			r := e.ValueFrom.ResourceFieldRef
			q, ok := resourceValue(c.Resources, r.Resource)
			if !ok {
				return nil, fmt.Errorf("env %s: resource %s not set", e.Name, r.Resource)
			}
			if !r.Divisor.IsZero() && r.Divisor.String() != "1" {
				return nil, fmt.Errorf("env %s: divisor %s not translated", e.Name, r.Divisor.String())
			}
			v = q
		default:
			return nil, fmt.Errorf("env %s: source %s not translated", e.Name, js(e.ValueFrom))
		}
		vars[e.Name] = v
		a = append(a, "-e", e.Name+"="+v)
	}
	c.Env = nil

	if len(c.Command) > 0 {
		b, _ := json.Marshal(c.Command)
		a = append(a, "--entrypoint", string(b))
		c.Command = nil
	}
	var args []string
	for _, s := range c.Args {
		args = append(args, expand(s, vars))
	}
	c.Args = nil

	// Resources: the limits and the CPU request as the kubelet sets them on the cgroup.
	if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		a = append(a, "--memory", fmt.Sprint(lim.Value()))
	}
	if lim, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		a = append(a, "--cpus", fmt.Sprintf("%.3f", float64(lim.MilliValue())/1000))
	}
	if req, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		a = append(a, "--cpu-shares", fmt.Sprint(max(2, req.MilliValue()*1024/1000)))
	}
	for name := range c.Resources.Limits {
		if name != corev1.ResourceMemory && name != corev1.ResourceCPU {
			return nil, fmt.Errorf("resource limit %s not translated", name)
		}
	}
	c.Resources = corev1.ResourceRequirements{} // memory request: scheduling only

	// Security context.
	sc := c.SecurityContext
	if sc == nil {
		return nil, fmt.Errorf("no securityContext: the runtime's defaults would apply")
	}
	sc = sc.DeepCopy()
	c.SecurityContext = nil
	if sc.RunAsUser == nil || sc.RunAsGroup == nil {
		return nil, fmt.Errorf("runAsUser/runAsGroup unset: the image's USER would apply")
	}
	a = append(a, "--user", fmt.Sprintf("%d:%d", *sc.RunAsUser, *sc.RunAsGroup))
	sc.RunAsUser, sc.RunAsGroup = nil, nil
	if sc.Privileged != nil && *sc.Privileged {
		return nil, fmt.Errorf("privileged: not run")
	}
	sc.Privileged = nil
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		return nil, fmt.Errorf("allowPrivilegeEscalation not false")
	}
	a = append(a, "--security-opt", "no-new-privileges")
	sc.AllowPrivilegeEscalation = nil
	if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		// No tmpfs on /tmp, /run: the kubelet adds none.
		a = append(a, "--read-only", "--read-only-tmpfs=false")
	}
	sc.ReadOnlyRootFilesystem = nil
	if caps := sc.Capabilities; caps != nil {
		for _, d := range caps.Drop {
			a = append(a, "--cap-drop", strings.ToLower(string(d)))
		}
		for _, ad := range caps.Add {
			a = append(a, "--cap-add", "CAP_"+string(ad))
		}
		sc.Capabilities = nil
	} else {
		return nil, fmt.Errorf("no capabilities: the runtime's default set would apply")
	}
	seccomp := podSeccomp
	if sc.SeccompProfile != nil {
		p, err := seccompArg(sc.SeccompProfile, env)
		if err != nil {
			return nil, err
		}
		seccomp = p
		sc.SeccompProfile = nil
	}
	if seccomp == "" {
		return nil, fmt.Errorf("no seccompProfile: the kubelet's default is Unconfined")
	}
	a = append(a, "--security-opt", "seccomp="+seccomp)
	if !reflect.ValueOf(*sc).IsZero() {
		return nil, fmt.Errorf("securityContext fields not translated: %s", js(sc))
	}

	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s: no such volume", m.Name)
		}
		if m.SubPath != "" || m.SubPathExpr != "" || m.MountPropagation != nil || m.RecursiveReadOnly != nil {
			return nil, fmt.Errorf("volumeMount %s: subPath/propagation not translated", m.Name)
		}
		var src string
		switch {
		case v.HostPath != nil:
			src = v.HostPath.Path
			typ := corev1.HostPathUnset
			if v.HostPath.Type != nil {
				typ = *v.HostPath.Type
			}
			switch typ {
			case corev1.HostPathDirectory:
				if st, err := os.Stat(src); err != nil || !st.IsDir() {
					return nil, fmt.Errorf("hostPath %s (Directory) does not exist on this node", src)
				}
			case corev1.HostPathDirectoryOrCreate:
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("hostPath type %q not translated", typ)
			}
		case v.ConfigMap != nil:
			data, ok := env.ConfigMaps[v.ConfigMap.Name]
			if !ok {
				return nil, fmt.Errorf("configMap %s is not in the manifest", v.ConfigMap.Name)
			}
			if len(v.ConfigMap.Items) > 0 {
				return nil, fmt.Errorf("configMap items not translated")
			}
			src = filepath.Join(env.Scratch, "configmap-"+v.Name)
			if err := os.MkdirAll(src, 0o755); err != nil {
				return nil, err
			}
			for k, s := range data {
				if err := os.WriteFile(filepath.Join(src, k), []byte(s), 0o644); err != nil {
					return nil, err
				}
			}
		default:
			return nil, fmt.Errorf("volume %s: source not translated: %s", v.Name, js(v.VolumeSource))
		}
		opt := "rw"
		if m.ReadOnly {
			opt = "ro"
		}
		a = append(a, "-v", src+":"+m.MountPath+":"+opt)
	}
	c.VolumeMounts = nil

	// Probes: the test sends them as the kubelet would. Ports: hostNetwork, nothing to map.
	tc.Readiness, tc.Liveness, tc.Ports = c.ReadinessProbe, c.LivenessProbe, c.Ports
	c.ReadinessProbe, c.LivenessProbe, c.Ports = nil, nil, nil
	if c.TerminationMessagePath != "" || c.TerminationMessagePolicy != "" {
		c.TerminationMessagePath, c.TerminationMessagePolicy = "", ""
	}
	if !reflect.ValueOf(c).IsZero() {
		return nil, fmt.Errorf("container fields not translated: %s", js(c))
	}
	tc.Args = append(append(a, env.Image), args...)
	return tc, nil
}

func seccompArg(p *corev1.SeccompProfile, env Env) (string, error) {
	switch p.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		return env.RuntimeDefault, nil
	case corev1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil {
			return "", fmt.Errorf("Localhost profile without localhostProfile")
		}
		return filepath.Join(env.Seccomp, *p.LocalhostProfile), nil
	case corev1.SeccompProfileTypeUnconfined:
		return "unconfined", nil
	}
	return "", fmt.Errorf("seccomp type %q", p.Type)
}

func resourceValue(r corev1.ResourceRequirements, name string) (string, bool) {
	switch name {
	case "limits.memory":
		q, ok := r.Limits[corev1.ResourceMemory]
		return fmt.Sprint(q.Value()), ok
	case "requests.memory":
		q, ok := r.Requests[corev1.ResourceMemory]
		return fmt.Sprint(q.Value()), ok
	}
	return "", false
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(VAR) with the container's earlier environment, as the kubelet does.
func expand(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

func prefix(flag string, vals []string) []string {
	var out []string
	for _, v := range vals {
		out = append(out, flag, v)
	}
	return out
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
