package labenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// DefaultPodPort is where a pod's server listens when it declares no TCP
// container port.
const DefaultPodPort = 8080

// kubelet is the stand-in: it gives Pods bound to lab nodes a network
// namespace, an IP from the node's podCIDR and an HTTP server on each TCP
// container port, reports them Running and Ready, and on deletion runs the
// preStop sleep, closes the listeners and removes the Pod object. The
// chart's DaemonSet pods it handles only while the lab adopts them
// (agentadopt.go).
type kubelet struct {
	l      *Lab
	ctx    context.Context
	mu     sync.Mutex
	pods   map[types.UID]*podRun
	usedIP map[int]map[byte]bool
	seq    int
	adopt  bool              // the chart's DaemonSet pods stand for the agents
	runs   map[int]*agentRun // by node index: its agent process's runs
}

type podRun struct {
	key     string
	uid     types.UID
	node    int
	netns   string
	hostIf  string
	ip      string
	started chan struct{} // closed when the network and servers are up (or failed)
	servers []*http.Server
	ending  bool
	closed  bool
}

func newKubelet(l *Lab) *kubelet {
	return &kubelet{l: l, pods: map[types.UID]*podRun{}, usedIP: map[int]map[byte]bool{}, runs: map[int]*agentRun{}}
}

func (k *kubelet) run(ctx context.Context, wg *sync.WaitGroup) error {
	k.ctx = ctx
	f := informers.NewSharedInformerFactory(k.l.cs, 0)
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { k.observe(o) },
		UpdateFunc: func(_, o any) { k.observe(o) },
		DeleteFunc: func(o any) { k.forget(o) },
	})
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() { defer wg.Done(); inf.Run(ctx.Done()) }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("pod informer did not sync")
	}
	return nil
}

// observe reacts to a Pod add or update.
func (k *kubelet) observe(o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	if chartAgentPod(pod) {
		k.observeChartAgent(pod)
		return
	}
	node, err := nodeIndex(pod.Spec.NodeName)
	if err != nil || node > k.l.opts.Nodes || k.l.nodeGone(node) || pod.Spec.HostNetwork { // host-network: agentpod.go
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ctx.Err() != nil {
		return
	}
	r := k.pods[pod.UID]
	if r == nil {
		if pod.DeletionTimestamp != nil {
			return
		}
		r = k.admit(pod, node)
		if r == nil {
			return
		}
		go k.startPod(pod.DeepCopy(), r)
		return
	}
	if pod.DeletionTimestamp != nil && !r.ending {
		r.ending = true
		go k.terminate(pod.DeepCopy(), r)
	}
}

// admit reserves an IP and names for a new pod (k.mu held).
func (k *kubelet) admit(pod *corev1.Pod, node int) *podRun {
	used := k.usedIP[node]
	if used == nil {
		used = map[byte]bool{}
		k.usedIP[node] = used
	}
	var host byte
	for h := 2; h < 255; h++ {
		if !used[byte(h)] {
			host = byte(h)
			break
		}
	}
	if host == 0 {
		k.l.opts.Logf("node %s: pod CIDR full, ignoring %s/%s", pod.Spec.NodeName, pod.Namespace, pod.Name)
		return nil
	}
	used[host] = true
	k.seq++
	ip := podCIDR(node).IP.To4()
	r := &podRun{
		key: pod.Namespace + "/" + pod.Name, uid: pod.UID, node: node,
		netns:   fmt.Sprintf("%sp%d", nsPrefix(k.l.opts.Name), k.seq),
		hostIf:  fmt.Sprintf("v%d", k.seq),
		ip:      net.IPv4(ip[0], ip[1], ip[2], host).String(),
		started: make(chan struct{}),
	}
	k.pods[pod.UID] = r
	return r
}

func (k *kubelet) startPod(pod *corev1.Pod, r *podRun) {
	defer close(r.started)
	if err := setupPodNet(k.l.opts.Name, r.node, r.netns, r.hostIf, r.ip); err != nil {
		k.l.opts.Logf("pod %s: network: %v", r.key, err)
		return
	}
	for _, port := range podPorts(pod) {
		ln, err := listenIn(r.netns, net.JoinHostPort(r.ip, strconv.Itoa(port)))
		if err != nil {
			k.l.opts.Logf("pod %s: listen %d: %v", r.key, port, err)
			continue
		}
		srv := &http.Server{Handler: podHandler(pod.Namespace, pod.Name), ReadHeaderTimeout: 5 * time.Second}
		k.mu.Lock()
		r.servers = append(r.servers, srv)
		k.mu.Unlock()
		go func() { _ = srv.Serve(ln) }()
	}
	if err := k.reportRunning(pod, r); err != nil && k.ctx.Err() == nil {
		k.l.opts.Logf("pod %s: status: %v", r.key, err)
	}
}

func podHandler(ns, name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%s/%s\n", ns, name)
	})
}

// podPorts lists the TCP container ports, or DefaultPodPort.
func podPorts(pod *corev1.Pod) []int {
	var ports []int
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
				ports = append(ports, int(p.ContainerPort))
			}
		}
	}
	if len(ports) == 0 {
		ports = []int{DefaultPodPort}
	}
	return ports
}

// reportRunning sets phase Running, Ready conditions and the pod IP.
func (k *kubelet) reportRunning(pod *corev1.Pod, r *podRun) error {
	ctx, cancel := context.WithTimeout(k.ctx, 30*time.Second)
	defer cancel()
	for {
		cur, err := k.l.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != r.uid || cur.DeletionTimestamp != nil {
			return nil
		}
		cur.Status = runningStatus(cur, r.ip, nodeIP(r.node).String())
		_, err = k.l.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

func runningStatus(pod *corev1.Pod, podIP, hostIP string) corev1.PodStatus {
	now := metav1.Now()
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now}
	}
	st := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{cond(corev1.PodScheduled), cond(corev1.PodInitialized),
			cond(corev1.ContainersReady), cond(corev1.PodReady)},
		HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}},
		PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}},
		StartTime: &now, QOSClass: corev1.PodQOSBestEffort,
	}
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return st
}

// terminate honours the grace period: preStop sleep (bounded by the
// grace), close the listeners (the "process" exits on SIGTERM), then delete
// the Pod object with grace 0 and remove its namespace.
func (k *kubelet) terminate(pod *corev1.Pod, r *podRun) {
	<-r.started
	grace := time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 30)) * time.Second
	if d := preStopSleep(pod); d > 0 {
		select {
		case <-time.After(min(d, grace)):
		case <-k.ctx.Done():
		}
	}
	k.closeServers(r)
	if k.ctx.Err() == nil {
		err := k.l.cs.CoreV1().Pods(pod.Namespace).Delete(k.ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &r.uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			k.l.opts.Logf("pod %s: delete: %v", r.key, err)
		}
	}
	k.release(r)
}

// preStopSleep returns the pod's preStop sleep: lifecycle.preStop.sleep or
// an exec hook running "sleep N" (directly or via sh -c).
func preStopSleep(pod *corev1.Pod) time.Duration {
	var best time.Duration
	for _, c := range pod.Spec.Containers {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
			continue
		}
		h := c.Lifecycle.PreStop
		var d time.Duration
		switch {
		case h.Sleep != nil:
			d = time.Duration(h.Sleep.Seconds) * time.Second
		case h.Exec != nil:
			d = execSleep(h.Exec.Command)
		}
		best = max(best, d)
	}
	return best
}

func execSleep(cmd []string) time.Duration {
	words := cmd
	if len(cmd) == 3 && strings.HasSuffix(cmd[0], "sh") && cmd[1] == "-c" {
		words = strings.Fields(cmd[2])
	}
	if len(words) != 2 || !strings.HasSuffix(words[0], "sleep") {
		return 0
	}
	s, err := strconv.ParseFloat(words[1], 64)
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

func (k *kubelet) closeServers(r *podRun) {
	k.mu.Lock()
	servers := r.servers
	r.servers = nil
	r.closed = true
	k.mu.Unlock()
	for _, s := range servers {
		_ = s.Close()
	}
}

// release closes the pod's servers, removes its network and frees its IP.
func (k *kubelet) release(r *podRun) {
	k.closeServers(r)
	if err := teardownPodNet(k.l.opts.Name, r.node, r.netns, r.hostIf); err != nil {
		k.l.opts.Logf("pod %s: teardown: %v", r.key, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pods[r.uid] == r {
		delete(k.pods, r.uid)
	}
	ip := net.ParseIP(r.ip).To4()
	delete(k.usedIP[r.node], ip[3])
}

// forget handles a Pod that vanished without passing through termination
// here (force deletion): its network goes at once.
func (k *kubelet) forget(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	r := k.pods[pod.UID]
	if r == nil || r.ending {
		k.mu.Unlock()
		return
	}
	r.ending = true
	k.mu.Unlock()
	go func() { <-r.started; k.release(r) }()
}

// dropNode stops every pod of node i without touching the API (the node
// is gone; its Pod objects are left for the pod garbage collector).
func (k *kubelet) dropNode(i int) {
	for _, r := range k.snapshot() {
		if r.node == i {
			<-r.started
			k.release(r)
		}
	}
}

func (k *kubelet) snapshot() []*podRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*podRun, 0, len(k.pods))
	for _, r := range k.pods {
		out = append(out, r)
	}
	return out
}

// shutdown stops every pod's servers and network (lab teardown).
func (k *kubelet) shutdown() {
	var wg sync.WaitGroup
	for _, r := range k.snapshot() {
		wg.Add(1)
		go func() { defer wg.Done(); <-r.started; k.release(r) }()
	}
	wg.Wait()
}
