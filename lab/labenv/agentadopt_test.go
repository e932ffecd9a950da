package labenv

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestChartAgentPod: only a DaemonSet's pod with the chart's labels in the
// agents' namespace is the chart's agent pod; the node is its affinity's.
func TestChartAgentPod(t *testing.T) {
	ds := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "netdrift", UID: "u", Controller: ptr.To(true)}
	pod := func(ns string, labels map[string]string, owners ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: labels, OwnerReferences: owners}}
	}
	if !chartAgentPod(pod(AgentNamespace, agentPodLabels, ds)) {
		t.Error("the chart's DaemonSet pod not recognized")
	}
	for name, p := range map[string]*corev1.Pod{
		"the lab's own agent pod (no owner)": pod(AgentNamespace, agentPodLabels),
		"another namespace":                  pod("default", agentPodLabels, ds),
		"other labels":                       pod(AgentNamespace, map[string]string{"app.kubernetes.io/name": "netdrift"}, ds),
		"owned by a ReplicaSet":              pod(AgentNamespace, agentPodLabels, metav1.OwnerReference{Kind: "ReplicaSet", Name: "x", Controller: ptr.To(true)}),
	} {
		if chartAgentPod(p) {
			t.Errorf("%s: taken for the chart's agent pod", name)
		}
	}
	p := pod(AgentNamespace, agentPodLabels, ds)
	if got := daemonSetNode(p); got != "" {
		t.Errorf("no affinity: node %q", got)
	}
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-2"}}}}}}}}
	if got := daemonSetNode(p); got != "node-2" {
		t.Errorf("affinity for node-2: node %q", got)
	}
}

// TestExitState: a run's end in a kubelet's terms, from a real process.
func TestExitState(t *testing.T) {
	log := filepath.Join(t.TempDir(), "p.log")
	started := time.Now()
	p, err := startProc("exit3", "", log, "sh", "-c", "exit 3")
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if s := exitState(p, started); s.ExitCode != 3 || s.Reason != "Error" || s.Signal != 0 {
		t.Errorf("exit 3: %+v", s)
	}
	p, err = startProc("sleep", "", log, "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if s := exitState(p, started); s.ExitCode != 143 || s.Signal != 15 || s.Reason != "Error" {
		t.Errorf("SIGTERM: %+v", s)
	}
	p, err = startProc("true", "", log, "true")
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if s := exitState(p, started); s.ExitCode != 0 || s.Reason != "Completed" || s.StartedAt.Time.After(s.FinishedAt.Time) {
		t.Errorf("exit 0: %+v", s)
	}
	if s := exitState(nil, started); s.Reason != "Unknown" {
		t.Errorf("no process: %+v", s)
	}
}
