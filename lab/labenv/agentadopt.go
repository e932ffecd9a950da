package labenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// The chart's DaemonSet pods as the nodes' agents. By default the lab
// registers a Pod object of its own per agent process (agentpod.go) and the
// kubelet stand-in leaves every other host-network pod alone, so a
// DaemonSet's pods stay Pending. After AdoptChartAgents the pods of a
// DaemonSet with the chart's pod labels in the agents' namespace stand for
// the lab's agent processes instead: the stand-in binds each to the node its
// node affinity names (the lab has no scheduler; the DaemonSet controller
// leaves binding to it) and reports it Running and Ready with the node's IP,
// its init containers completed and its agent container restarted as often
// as the lab restarted that node's agent process; nodestream serves the
// agent container's exec and logs. Deleting such a pod removes the Pod
// object only: the agent process is the lab's and keeps running.

// agentRun is what the lab remembers of a node's agent process runs.
type agentRun struct {
	starts  int
	started time.Time
	last    *corev1.ContainerStateTerminated // the previous run's end
}

// AdoptChartAgents deletes the lab's own agent Pod objects and lets the
// chart's DaemonSet pods stand for the agents (see above).
func (l *Lab) AdoptChartAgents(ctx context.Context) error {
	if l.kubelet == nil {
		return errors.New("adopt the chart's agent pods: this lab runs no kubelet stand-in (start it with labenv.Start)")
	}
	l.kubelet.setAdopt(true)
	pods := l.cs.CoreV1().Pods(AgentNamespace)
	for i := 1; i <= l.opts.Nodes; i++ {
		err := pods.Delete(ctx, AgentPodName(nodeName(i)), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// ReleaseChartAgents ends the adoption: chart agent pods still present are
// deleted at once (a DaemonSet still installed recreates them, left Pending
// as without adoption) and every running agent gets its own Pod object back.
func (l *Lab) ReleaseChartAgents(ctx context.Context) error {
	if l.kubelet == nil {
		return nil
	}
	l.kubelet.setAdopt(false)
	pods, err := l.chartAgentPods(ctx, "")
	if err != nil {
		return err
	}
	for _, p := range pods {
		err := l.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	var errs []error
	for i := 1; i <= l.opts.Nodes; i++ {
		if p := l.proc(agentName(i)); p != nil && p.Alive() && !l.nodeGone(i) {
			errs = append(errs, l.registerAgentPod(i))
		}
	}
	return errors.Join(errs...)
}

// chartAgentPods lists the chart's DaemonSet pods (on node, if not empty).
func (l *Lab) chartAgentPods(ctx context.Context, node string) ([]corev1.Pod, error) {
	opts := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(agentPodLabels).String()}
	if node != "" {
		opts.FieldSelector = "spec.nodeName=" + node
	}
	list, err := l.cs.CoreV1().Pods(AgentNamespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if chartAgentPod(&p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// chartAgentPod reports whether pod is one of the chart's DaemonSet pods.
func chartAgentPod(pod *corev1.Pod) bool {
	if pod.Namespace != AgentNamespace {
		return false
	}
	for k, v := range agentPodLabels {
		if pod.Labels[k] != v {
			return false
		}
	}
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "DaemonSet"
}

// daemonSetNode is the node a DaemonSet pod's required node affinity names
// (the DaemonSet controller's metadata.name field term).
func daemonSetNode(pod *corev1.Pod) string {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// noteAgentRun records that node i's agent process is about to start: the
// log file's size (nodestream's run boundaries: `kubectl logs` and
// `--previous`) and how the previous run ended.
func (l *Lab) noteAgentRun(i int) error {
	k := l.kubelet
	if k == nil {
		return nil
	}
	k.mu.Lock()
	r := k.runs[i]
	if r == nil {
		r = &agentRun{}
		k.runs[i] = r
	}
	if r.starts > 0 {
		r.last = exitState(l.proc(agentName(i)), r.started)
	}
	r.starts++
	r.started = time.Now()
	k.mu.Unlock()
	log := l.LogPath(agentName(i))
	var size int64
	if st, err := os.Stat(log); err == nil {
		size = st.Size()
	}
	f, err := os.OpenFile(log+".runs", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, strconv.FormatInt(size, 10))
	return errors.Join(err, f.Close())
}

// exitState is how the process p (started at started) ended, in a
// kubelet's terms: exit code, or 128+signal.
func exitState(p *Proc, started time.Time) *corev1.ContainerStateTerminated {
	t := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
		StartedAt: metav1.NewTime(started), FinishedAt: metav1.Now()}
	if p == nil || p.cmd == nil || p.done == nil {
		t.Reason = "Unknown"
		return t
	}
	select {
	case <-p.done: // Wait has returned: ProcessState is set
	case <-time.After(5 * time.Second):
		t.Reason = "Unknown"
		return t
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.ExitCode, t.Reason, t.Signal = 128+int32(ws.Signal()), "Error", int32(ws.Signal())
	} else if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.ExitCode, t.Reason = int32(code), "Error"
	}
	return t
}

// reportChartAgents sets the status of the chart agent pods on node i.
func (l *Lab) reportChartAgents(ctx context.Context, i int) error {
	pods, err := l.chartAgentPods(ctx, nodeName(i))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods {
		errs = append(errs, l.reportChartAgent(ctx, p.Name, i))
	}
	return errors.Join(errs...)
}

// reportChartAgent reports pod name Running on node i, as node i's agent.
func (l *Lab) reportChartAgent(ctx context.Context, name string, i int) error {
	pods := l.cs.CoreV1().Pods(AgentNamespace)
	for {
		cur, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil || cur.DeletionTimestamp != nil {
			return err
		}
		cur.Status = l.chartAgentStatus(cur, i)
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// chartAgentStatus: Running and Ready with the node's IP, init containers
// completed, the agent container restarted as often as the lab restarted
// node i's agent, its last state how the previous run ended.
func (l *Lab) chartAgentStatus(pod *corev1.Pod, i int) corev1.PodStatus {
	ip := nodeIP(i).String()
	st := runningStatus(pod, ip, ip)
	st.QOSClass = pod.Status.QOSClass // set at creation from the resources, immutable
	if pod.Status.StartTime != nil {  // reported before: the pod started then
		st.StartTime = pod.Status.StartTime
	}
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
				StartedAt: st.StartTime.Rfc3339Copy(), FinishedAt: st.StartTime.Rfc3339Copy()}},
		})
	}
	k := l.kubelet
	k.mu.Lock()
	defer k.mu.Unlock()
	r := k.runs[i]
	for j := range st.ContainerStatuses {
		c := &st.ContainerStatuses[j]
		if c.Name != "agent" || r == nil {
			continue
		}
		c.RestartCount = int32(max(r.starts-1, 0))
		c.State.Running.StartedAt = metav1.NewTime(r.started)
		if r.last != nil {
			c.LastTerminationState = corev1.ContainerState{Terminated: r.last.DeepCopy()}
		}
	}
	return st
}

// observeChartAgent binds, reports or ends a chart agent pod while the lab
// adopts them (k.mu not held).
func (k *kubelet) observeChartAgent(pod *corev1.Pod) {
	k.mu.Lock()
	adopt := k.adopt && k.ctx.Err() == nil
	k.mu.Unlock()
	if !adopt {
		return
	}
	pod = pod.DeepCopy()
	switch {
	case pod.DeletionTimestamp != nil:
		go k.endChartAgent(pod)
	case pod.Spec.NodeName == "":
		go k.bindChartAgent(pod)
	case pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending:
		go func() {
			i, err := k.agentNode(pod.Spec.NodeName)
			if err == nil {
				err = k.l.reportChartAgent(k.ctx, pod.Name, i)
			}
			if err != nil && k.ctx.Err() == nil {
				k.l.opts.Logf("pod %s/%s: status: %v", pod.Namespace, pod.Name, err)
			}
		}()
	}
}

// agentNode is the index of a live lab node.
func (k *kubelet) agentNode(node string) (int, error) {
	i, err := nodeIndex(node)
	if err != nil || i > k.l.opts.Nodes || k.l.nodeGone(i) {
		return 0, fmt.Errorf("node %q: not a node of this lab", node)
	}
	return i, nil
}

// bindChartAgent binds a DaemonSet pod to the node its affinity names, as
// the scheduler would.
func (k *kubelet) bindChartAgent(pod *corev1.Pod) {
	node := daemonSetNode(pod)
	if _, err := k.agentNode(node); err != nil {
		k.l.opts.Logf("pod %s/%s: not bound: %v", pod.Namespace, pod.Name, err)
		return
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	err := k.l.cs.CoreV1().Pods(pod.Namespace).Bind(k.ctx, b, metav1.CreateOptions{})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && k.ctx.Err() == nil {
		k.l.opts.Logf("pod %s/%s: bind to %s: %v", pod.Namespace, pod.Name, node, err)
	}
}

// endChartAgent removes a deleted chart agent pod's object (grace 0): the
// pod's "container" is the lab's agent process, which keeps running.
func (k *kubelet) endChartAgent(pod *corev1.Pod) {
	err := k.l.cs.CoreV1().Pods(pod.Namespace).Delete(k.ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && k.ctx.Err() == nil {
		k.l.opts.Logf("pod %s/%s: delete: %v", pod.Namespace, pod.Name, err)
	}
}

func (k *kubelet) setAdopt(on bool) {
	k.mu.Lock()
	k.adopt = on
	k.mu.Unlock()
}

func (k *kubelet) adopting() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.adopt
}
