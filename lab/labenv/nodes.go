package labenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const nodeLeaseNS = "kube-node-lease"

// registerNodes creates the Node objects (podCIDR set, Ready, InternalIP)
// and their Leases, and starts one renewal loop per node.
func (l *Lab) registerNodes(ctx, runCtx context.Context) error {
	for i := 1; i <= l.opts.Nodes; i++ {
		if err := l.registerNode(ctx, i); err != nil {
			return fmt.Errorf("register %s: %w", nodeName(i), err)
		}
		l.wg.Add(1)
		go func(i int) {
			defer l.wg.Done()
			l.leaseLoop(runCtx, i)
		}(i)
	}
	return nil
}

func (l *Lab) registerNode(ctx context.Context, i int) error {
	name := nodeName(i)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "netdrift.io/lab": l.opts.Name}},
		Spec: corev1.NodeSpec{PodCIDR: podCIDR(i).String(), PodCIDRs: []string{podCIDR(i).String()}},
	}
	created, err := l.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	created.Status = corev1.NodeStatus{
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: nodeIP(i).String()},
			{Type: corev1.NodeHostName, Address: name},
		},
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "netdrift lab kubelet stand-in", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Capacity: corev1.ResourceList{}, Phase: corev1.NodeRunning,
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: KubeletPort}},
	}
	if _, err := l.cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	// The API server creates the kube-node-lease namespace shortly after
	// it reports ready; retry until it exists.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := l.renewLease(ctx, i)
		if err == nil || !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// renewLease creates or renews node i's Lease with the current time.
func (l *Lab) renewLease(ctx context.Context, i int) error {
	name := nodeName(i)
	leases := l.cs.CoordinationV1().Leases(nodeLeaseNS)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
				AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

func (l *Lab) leaseLoop(ctx context.Context, i int) {
	t := time.NewTicker(l.opts.LeasePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.nodeGone(i) {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := l.renewLease(rctx, i); err != nil && ctx.Err() == nil {
			l.opts.Logf("renew lease %s: %v", nodeName(i), err)
		}
		cancel()
	}
}

func (l *Lab) nodeGone(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gone[i]
}

func kubeProxyName(i int) string { return "kube-proxy/" + nodeName(i) }
func agentName(i int) string     { return "agent/" + nodeName(i) }
func watchOnlyName(i int) string { return "watchonly/" + nodeName(i) }

func (l *Lab) kubeProxyArgs(i int) []string {
	args := []string{filepath.Join(l.opts.BinDir, "kube-proxy"),
		"--kubeconfig=" + l.kubeconfig,
		"--hostname-override=" + nodeName(i),
		"--proxy-mode=" + l.opts.ProxyMode,
		"--cluster-cidr=" + clusterCIDR,
		// Each kube-proxy has its own namespace, so the default ports
		// (metrics 10249, healthz 10256) never collide; metrics on every
		// address of the node namespace, for the lab's Prometheus.
		"--metrics-bind-address=0.0.0.0:10249",
		"--healthz-bind-address=0.0.0.0:10256",
		// Leave global conntrack settings alone.
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--v=2",
	}
	return append(args, l.opts.ProxyArgs...)
}

func (l *Lab) startKubeProxy(i int) error {
	if l.opts.ProxyMode == "cilium" {
		return l.startCilium(i)
	}
	env, err := l.kubeProxyEnv()
	if err != nil {
		return err
	}
	_, err = l.startEnv(kubeProxyName(i), nodeNS(l.opts.Name, i), env, l.kubeProxyArgs(i))
	return err
}

// kubeProxyEnv returns the PATH that makes kube-proxy run the iptables
// backend of Options.IPTablesBackend (nil: the host's default).
func (l *Lab) kubeProxyEnv() ([]string, error) {
	b := l.opts.IPTablesBackend
	if b == "" || l.opts.ProxyMode != "iptables" {
		return nil, nil
	}
	dir := filepath.Join(l.opts.Dir, "iptables-"+b)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, suffix := range []string{"", "-save", "-restore"} {
			target, err := exec.LookPath(fam + "-" + b + suffix)
			if err != nil {
				return nil, fmt.Errorf("iptables backend %s: %w (install the iptables package)", b, err)
			}
			link := filepath.Join(dir, fam+suffix)
			if _, err := os.Lstat(link); err == nil {
				continue
			}
			if err := os.Symlink(target, link); err != nil {
				return nil, err
			}
		}
	}
	return []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}, nil
}

// StartWatchOnly starts the lab's watchonly program in node's namespace
// (client-go informers on what the agent watches, handlers that do
// nothing: the API watch's own cost) and returns its PID. The lab stops it
// like its other processes.
func (l *Lab) StartWatchOnly(node string) (int, error) {
	i, err := l.index(node)
	if err != nil {
		return 0, err
	}
	p, err := l.start(watchOnlyName(i), nodeNS(l.opts.Name, i),
		[]string{filepath.Join(l.opts.BinDir, "watchonly"), "--kubeconfig", l.kubeconfig, "--node-name", nodeName(i)})
	if err != nil {
		return 0, err
	}
	return p.PID, nil
}

// StartAgent starts node's netdrift agent (Options.Agent) if it is not
// running; with Options.DeferAgents this is how agents start. It returns
// the agent's PID. The lab stops it like its other processes.
func (l *Lab) StartAgent(node string) (int, error) {
	i, err := l.index(node)
	if err != nil {
		return 0, err
	}
	if l.opts.Agent == "" {
		return 0, fmt.Errorf("lab started without Options.Agent")
	}
	if p := l.proc(agentName(i)); p != nil && p.Alive() {
		return p.PID, nil
	}
	if err := l.startAgent(i); err != nil {
		return 0, err
	}
	return l.AgentPID(node)
}

// AgentPID returns the PID of node's netdrift agent.
func (l *Lab) AgentPID(node string) (int, error) {
	i, err := l.index(node)
	if err != nil {
		return 0, err
	}
	p := l.proc(agentName(i))
	if p == nil || !p.Alive() {
		return 0, fmt.Errorf("no running agent on %q", node)
	}
	return p.PID, nil
}

// startAgent is the hook for the netdrift agent: when Options.Agent is set
// it runs "<Agent> agent --node-name N --kubeconfig K --listen <nodeIP>:9760"
// inside node i's namespace, logging to logs/agent-node-i.log.
func (l *Lab) startAgent(i int) error {
	if l.opts.Agent == "" {
		return nil
	}
	args := append([]string{l.opts.Agent, "agent",
		"--node-name", nodeName(i),
		"--kubeconfig", l.kubeconfig,
		"--listen", l.AgentAddr(nodeName(i)),
	}, l.opts.AgentArgs...)
	if l.opts.ProxyMode == "cilium" { // the node's maps, as a DaemonSet mounts the node's /sys/fs/bpf
		// The stamp with its tracepoint fallback: the lab's kernel may refuse
		// fexit on the hash map's functions, and the lab has no other load.
		args = append(args, "--bpffs", l.nodeBPFFS(i), "--cilium-write-stamp=auto")
	}
	if err := l.noteAgentRun(i); err != nil {
		return err
	}
	if _, err := l.startEnv(agentName(i), nodeNS(l.opts.Name, i), l.opts.AgentEnv, args); err != nil {
		return err
	}
	return l.registerAgentPod(i)
}

// waitKubeProxy waits until kube-proxy on node i answers /healthz with 200
// and has programmed the "kubernetes" Service (its first full sync is done;
// /healthz alone is 200 before that).
func (l *Lab) waitKubeProxy(ctx context.Context, i int, timeout time.Duration) error {
	if l.opts.ProxyMode == "cilium" {
		return l.waitCilium(ctx, i, timeout)
	}
	c := l.httpClientIn(nodeNS(l.opts.Name, i))
	deadline := time.Now().Add(timeout)
	url := "http://127.0.0.1:10256/healthz"
	for {
		p := l.proc(kubeProxyName(i))
		if p == nil || !p.Alive() {
			return fmt.Errorf("kube-proxy on %s exited; see %s", nodeName(i), filepath.Join(l.opts.Dir, "logs", sanitize(kubeProxyName(i))+".log"))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && l.programmedAPIService(i) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-proxy on %s not healthy after %s (last: %v)", nodeName(i), timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var transports sync.Map // netns name -> *http.Transport

func (l *Lab) httpClientIn(ns string) *http.Client {
	t, _ := transports.LoadOrStore(ns, &http.Transport{DialContext: DialContextIn(ns), DisableKeepAlives: true})
	return &http.Client{Transport: t.(*http.Transport), Timeout: 5 * time.Second}
}

func nodeIndex(name string) (int, error) {
	var i int
	if _, err := fmt.Sscanf(name, "node-%d", &i); err != nil || name != nodeName(i) {
		return 0, fmt.Errorf("not a lab node name: %q", name)
	}
	return i, nil
}

func (l *Lab) programmedAPIService(i int) bool {
	b, err := l.ProgrammedBackends(nodeName(i), kubernetesServiceIP, 443)
	return err == nil && len(b) > 0
}
