package labenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// Node describes one lab node.
type Node struct {
	Name    string // Node object name, e.g. "node-1"
	NetNS   string // network namespace name
	IP      string // InternalIP on the lab bridge
	PodCIDR string
}

// Name is the lab's name; Dir its directory; UpTook how long Start took.
func (l *Lab) Name() string                    { return l.opts.Name }
func (l *Lab) Dir() string                     { return l.opts.Dir }
func (l *Lab) ProxyMode() string               { return l.opts.ProxyMode }
func (l *Lab) UpTook() time.Duration           { return l.upTook }
func (l *Lab) RouterNetNS() string             { return routerNS(l.opts.Name) }
func (l *Lab) APIServerURL() string            { return apiServerURL() }
func (l *Lab) Clientset() kubernetes.Interface { return l.cs }

// Kubeconfig is the admin kubeconfig path. Its server address lives on the
// lab bridge: usable from node namespaces (kube-proxy, agents) and from
// this process through RESTConfig, whose dialer enters the router namespace.
func (l *Lab) Kubeconfig() string { return l.kubeconfig }

// RESTConfig returns a copy of the client configuration (with the
// namespace-aware dialer).
func (l *Lab) RESTConfig() *rest.Config { return rest.CopyConfig(l.cfg) }

// Nodes lists the nodes that have not been deleted.
func (l *Lab) Nodes() []Node {
	var out []Node
	for i := 1; i <= l.opts.Nodes; i++ {
		if !l.nodeGone(i) {
			out = append(out, l.node(i))
		}
	}
	return out
}

func (l *Lab) node(i int) Node {
	return Node{Name: nodeName(i), NetNS: nodeNS(l.opts.Name, i), IP: nodeIP(i).String(), PodCIDR: podCIDR(i).String()}
}

// NodeNetNS returns the namespace of the named node.
func (l *Lab) NodeNetNS(node string) (string, error) {
	i, err := l.index(node)
	if err != nil {
		return "", err
	}
	return nodeNS(l.opts.Name, i), nil
}

func (l *Lab) index(node string) (int, error) {
	i, err := nodeIndex(node)
	if err != nil || i > l.opts.Nodes {
		return 0, fmt.Errorf("no lab node %q", node)
	}
	return i, nil
}

// AgentAddr is where node's netdrift agent listens (nodeIP:9760).
func (l *Lab) AgentAddr(node string) string {
	i, _ := nodeIndex(node)
	return net.JoinHostPort(nodeIP(i).String(), strconv.Itoa(AgentPort))
}

// HTTPClient returns a client whose connections start inside node's
// namespace (e.g. for the agent's /v1 and /metrics, or a ClusterIP).
func (l *Lab) HTTPClient(node string) (*http.Client, error) {
	ns, err := l.NodeNetNS(node)
	if err != nil {
		return nil, err
	}
	return l.httpClientIn(ns), nil
}

// DialContext dials from inside node's namespace.
func (l *Lab) DialContext(ctx context.Context, node, network, addr string) (net.Conn, error) {
	ns, err := l.NodeNetNS(node)
	if err != nil {
		return nil, err
	}
	return DialContextIn(ns)(ctx, network, addr)
}

// Exec runs a command inside node's namespace (e.g. "iptables-save").
func (l *Lab) Exec(node string, name string, args ...string) ([]byte, error) {
	ns, err := l.NodeNetNS(node)
	if err != nil {
		return nil, err
	}
	return nsExec(ns, name, args...)
}

// LogPath returns the log file of a lab process: "etcd", "kube-apiserver",
// "kube-controller-manager", "kube-proxy/node-1", "agent/node-1".
func (l *Lab) LogPath(proc string) string {
	return filepath.Join(l.opts.Dir, "logs", sanitize(proc)+".log")
}

// KubeProxyPID returns the PID of node's kube-proxy.
func (l *Lab) KubeProxyPID(node string) (int, error) {
	p := l.proc("kube-proxy/" + node)
	if p == nil || !p.Alive() {
		return 0, fmt.Errorf("no running kube-proxy on %q", node)
	}
	return p.PID, nil
}

// FreezeKubeProxy stops node's kube-proxy with SIGSTOP.
func (l *Lab) FreezeKubeProxy(node string) error {
	return l.signalProc("kube-proxy/"+node, syscall.SIGSTOP)
}

// ThawKubeProxy resumes node's kube-proxy with SIGCONT.
func (l *Lab) ThawKubeProxy(node string) error {
	return l.signalProc("kube-proxy/"+node, syscall.SIGCONT)
}

// FreezeControllerManager stops kube-controller-manager with SIGSTOP: the
// EndpointSlice controller (and the pod garbage collector) stop reacting,
// as when the control plane is slow. ThawControllerManager resumes it.
func (l *Lab) FreezeControllerManager() error {
	return l.signalProc("kube-controller-manager", syscall.SIGSTOP)
}

// ThawControllerManager resumes kube-controller-manager with SIGCONT.
func (l *Lab) ThawControllerManager() error {
	return l.signalProc("kube-controller-manager", syscall.SIGCONT)
}

// StopKubeProxy terminates node's kube-proxy; StartKubeProxy starts it again.
func (l *Lab) StopKubeProxy(node string) error {
	p := l.proc("kube-proxy/" + node)
	if p == nil {
		return fmt.Errorf("no kube-proxy on %q", node)
	}
	p.stop(5 * time.Second)
	return nil
}

// StartKubeProxy starts node's kube-proxy if it is not running and waits
// for its first sync: up to ctx's deadline, or 60 s without one.
func (l *Lab) StartKubeProxy(ctx context.Context, node string) error {
	i, err := l.index(node)
	if err != nil {
		return err
	}
	if p := l.proc(kubeProxyName(i)); p != nil && p.Alive() {
		return nil
	}
	if err := l.startKubeProxy(i); err != nil {
		return err
	}
	timeout := 60 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	return l.waitKubeProxy(ctx, i, timeout)
}

func (l *Lab) signalProc(name string, sig syscall.Signal) error {
	p := l.proc(name)
	if p == nil {
		return fmt.Errorf("no process %q in this lab", name)
	}
	return p.signal(sig)
}

// DeleteNode removes a node the hard way: its kube-proxy and agent stop,
// its pods' listeners and namespaces go, its namespace (and so its link to
// the bridge) is deleted, and its Node object and Lease are deleted. Its
// Pod objects stay for the pod garbage collector, and the other nodes keep
// their routes to its pod CIDR until RemoveNodeRoutes.
func (l *Lab) DeleteNode(ctx context.Context, node string) error {
	i, err := l.index(node)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.gone[i] = true
	l.mu.Unlock()
	for _, n := range []string{agentName(i), kubeProxyName(i), nodestreamName(i)} {
		if p := l.proc(n); p != nil {
			p.stop(5 * time.Second)
		}
	}
	l.kubelet.dropNode(i)
	if err := delNetns(nodeNS(l.opts.Name, i)); err != nil {
		return err
	}
	if err := l.cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = l.cs.CoordinationV1().Leases(nodeLeaseNS).Delete(ctx, node, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return err
}

// RemoveNodeRoutes deletes the other nodes' routes to node's pod CIDR.
func (l *Lab) RemoveNodeRoutes(node string) error {
	i, err := l.index(node)
	if err != nil {
		return err
	}
	for j := 1; j <= l.opts.Nodes; j++ {
		if j != i && !l.nodeGone(j) {
			if err := ipCmd("-n", nodeNS(l.opts.Name, j), "route", "del", podCIDR(i).String()); err != nil {
				return err
			}
		}
	}
	return nil
}

// PodSpec is what CreatePod needs.
type PodSpec struct {
	Namespace string // default "default"
	Name      string
	Node      string // spec.nodeName (no scheduler runs)
	Labels    map[string]string
	Port      int           // container port; default DefaultPodPort
	PreStop   time.Duration // lifecycle.preStop.sleep, whole seconds
	Grace     *int64        // terminationGracePeriodSeconds
}

// CreatePod creates a Pod bound to a lab node.
func (l *Lab) CreatePod(ctx context.Context, s PodSpec) (*corev1.Pod, error) {
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	if s.Port == 0 {
		s.Port = DefaultPodPort
	}
	c := corev1.Container{Name: "app", Image: "netdrift.io/lab-server",
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(s.Port), Protocol: corev1.ProtocolTCP}}}
	if s.PreStop > 0 {
		c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Sleep: &corev1.SleepAction{Seconds: int64(s.PreStop / time.Second)}}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels},
		Spec: corev1.PodSpec{NodeName: s.Node, Containers: []corev1.Container{c},
			TerminationGracePeriodSeconds: s.Grace},
	}
	return l.cs.CoreV1().Pods(s.Namespace).Create(ctx, pod, metav1.CreateOptions{})
}

// WaitPodRunning waits until the pod is Ready with an IP and returns it.
func (l *Lab) WaitPodRunning(ctx context.Context, ns, name string, timeout time.Duration) (*corev1.Pod, error) {
	deadline := time.Now().Add(timeout)
	for {
		pod, err := l.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && pod.Status.PodIP != "" && podReady(pod) {
			return pod, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("pod %s/%s not running after %s (last error %v)", ns, name, timeout, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DeletePod deletes a Pod with the given grace period (nil = the pod's own).
func (l *Lab) DeletePod(ctx context.Context, ns, name string, grace *int64) error {
	return l.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: grace})
}

// WaitPodGone waits until the Pod object no longer exists.
func (l *Lab) WaitPodGone(ctx context.Context, ns, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := l.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod %s/%s still exists after %s", ns, name, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ServiceSpec is what CreateService needs.
type ServiceSpec struct {
	Namespace  string // default "default"
	Name       string
	Selector   map[string]string
	Port       int // service port; default 80
	TargetPort int // default DefaultPodPort
	// Type is ClusterIP (default) or NodePort.
	Type corev1.ServiceType
	// ExternalTrafficPolicy (NodePort only) and InternalTrafficPolicy:
	// "" is the API's default (Cluster).
	ExternalTrafficPolicy corev1.ServiceExternalTrafficPolicy
	InternalTrafficPolicy *corev1.ServiceInternalTrafficPolicy
}

// CreateService creates a TCP Service and returns it (ClusterIP allocated).
func (l *Lab) CreateService(ctx context.Context, s ServiceSpec) (*corev1.Service, error) {
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	if s.Port == 0 {
		s.Port = 80
	}
	if s.TargetPort == 0 {
		s.TargetPort = DefaultPodPort
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
		Spec: corev1.ServiceSpec{Selector: s.Selector, Type: s.Type, ExternalTrafficPolicy: s.ExternalTrafficPolicy,
			InternalTrafficPolicy: s.InternalTrafficPolicy, Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: int32(s.Port), TargetPort: intstr.FromInt32(int32(s.TargetPort))}}},
	}
	return l.cs.CoreV1().Services(s.Namespace).Create(ctx, svc, metav1.CreateOptions{})
}

// DeleteService deletes a Service.
func (l *Lab) DeleteService(ctx context.Context, ns, name string) error {
	return l.cs.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// Grace is a helper for DeletePod's grace argument.
func Grace(seconds int64) *int64 { return ptr.To(seconds) }

// PIDs lists the PIDs of every process the lab started.
func (l *Lab) PIDs() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, p := range l.state.Procs {
		out = append(out, p.PID)
	}
	return out
}
