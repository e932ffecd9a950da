package labenv

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// AgentNamespace holds the lab's agent Pod objects, as the chart's.
const AgentNamespace = "netdrift"

// agentPodLabels are the chart's DaemonSet pod labels
// (deploy/helm/netdrift/templates/_helpers.tpl: netdrift.selectorLabels).
var agentPodLabels = map[string]string{"app.kubernetes.io/name": "netdrift", "app.kubernetes.io/component": "agent"}

// AgentPodName is the name of node's agent Pod object.
func AgentPodName(node string) string { return "netdrift-" + node }

// agentPod is the Pod object of node i's agent process: host network,
// bound to the node, declaring the plain HTTP port the agent listens on.
func (l *Lab) agentPod(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: AgentPodName(nodeName(i)), Namespace: AgentNamespace, Labels: agentPodLabels},
		Spec: corev1.PodSpec{
			NodeName: nodeName(i), HostNetwork: true, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "agent", Image: "netdrift/netdrift:lab",
				Args:  []string{"agent", "--node-name=" + nodeName(i), "--listen=" + l.AgentAddr(nodeName(i))},
				Ports: []corev1.ContainerPort{{Name: "http-local", ContainerPort: AgentPort, Protocol: corev1.ProtocolTCP}},
			}},
		},
	}
}

// registerAgentPod creates (or keeps) node i's agent Pod object and reports
// it Running with the node's IP, as a kubelet does for a host-network pod.
// The kubelet stand-in leaves host-network pods alone. While the lab adopts
// the chart's DaemonSet pods (agentadopt.go), node i's chart pod is
// reported instead, with the agent's restart.
func (l *Lab) registerAgentPod(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if l.kubelet != nil && l.kubelet.adopting() {
		return l.reportChartAgents(ctx, i)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: AgentNamespace}}
	if _, err := l.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pods := l.cs.CoreV1().Pods(AgentNamespace)
	pod, err := pods.Create(ctx, l.agentPod(i), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		pod, err = pods.Get(ctx, AgentPodName(nodeName(i)), metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	ip := nodeIP(i).String()
	pod.Status = runningStatus(pod, ip, ip)
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}
