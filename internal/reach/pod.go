package reach

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/netdrift/netdrift/internal/textmatch"
)

// findAgentPod returns the running agent pod on node. With none there, the
// error names the nodes that have one (and the closest names to node).
func findAgentPod(ctx context.Context, cs kubernetes.Interface, ns, selector, node string) (*corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: selector,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, listError(err, ns)
	}
	if len(pods.Items) == 0 {
		return nil, noAgentError(ctx, cs, ns, selector, node)
	}
	return pickRunning(pods.Items, ns, node)
}

// pickRunning prefers a Running pod not being deleted (a DaemonSet rollout
// briefly has two on a node).
func pickRunning(pods []corev1.Pod, ns, node string) (*corev1.Pod, error) {
	var phases []string
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p, nil
		}
		phases = append(phases, fmt.Sprintf("%s is %s", p.Name, podState(p)))
	}
	return nil, fmt.Errorf("the agent pod on node %q is not running (%s): see kubectl -n %s describe pod %s",
		node, strings.Join(phases, "; "), ns, pods[0].Name)
}

func podState(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "terminating"
	}
	if p.Status.Phase == "" {
		return "Pending"
	}
	return string(p.Status.Phase)
}

// listError turns a failed LIST into advice; Forbidden names the permission.
func listError(err error, ns string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("you may not list pods in namespace %q: the responder needs RBAC verbs get and list on pods and get and create on pods/portforward there (the chart's netdrift-responder Role; docs/install.md): %w", ns, err)
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %q not found: pass the agents' namespace with --agent-namespace: %w", ns, err)
	}
	return fmt.Errorf("list agent pods in namespace %q: %w", ns, err)
}

// noAgentError says that node has no agent and which nodes do.
func noAgentError(ctx context.Context, cs kubernetes.Interface, ns, selector, node string) error {
	all, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("no agent pod on node %q in namespace %q (%v)", node, ns, listError(err, ns))
	}
	nodes := agentNodes(all.Items)
	if len(nodes) == 0 {
		return fmt.Errorf("no agent pod in namespace %q (selector %s): is netdrift installed there? pass its namespace with -n", ns, selector)
	}
	msg := fmt.Sprintf("no agent pod on node %q in namespace %q", node, ns)
	if near := textmatch.Closest(node, nodes, 3); len(near) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", strings.Join(near, " or "))
	}
	return fmt.Errorf("%s; nodes with an agent: %s", msg, summarize(nodes, 20))
}

func agentNodes(pods []corev1.Pod) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range pods {
		if n := p.Spec.NodeName; n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// summarize lists at most max names and counts the rest.
func summarize(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}
