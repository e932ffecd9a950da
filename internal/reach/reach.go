// Package reach opens a connection to one node's netdrift agent through the
// API server: it finds the agent pod on the node (the DaemonSet's labels and
// a spec.nodeName field selector), port-forwards to the agent's plain HTTP
// port with the caller's own credentials (pods/portforward, as kubectl
// port-forward does) and hands back a local base URL for the agent's API.
package reach

import (
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// DefaultNamespace is where the chart installs the agents.
const DefaultNamespace = "netdrift"

// AgentSelector selects the agent pods: the chart's DaemonSet selector
// (deploy/helm/netdrift/templates/_helpers.tpl, netdrift.selectorLabels).
const AgentSelector = "app.kubernetes.io/name=netdrift,app.kubernetes.io/component=agent"

// Reacher reaches agents in one namespace.
type Reacher struct {
	cfg       *rest.Config
	cs        kubernetes.Interface
	namespace string
	selector  string
	// ErrOut receives the port-forward's per-connection errors (default:
	// discarded; the HTTP request that failed reports its own error).
	ErrOut io.Writer
}

// New returns a Reacher for the agents in namespace ("" = DefaultNamespace).
func New(cfg *rest.Config, namespace string) (*Reacher, error) {
	if cfg == nil {
		return nil, errors.New("reach: no API server configuration (kubeconfig)")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("reach: client for %s: %w", cfg.Host, err)
	}
	return newWith(cfg, cs, namespace), nil
}

func newWith(cfg *rest.Config, cs kubernetes.Interface, namespace string) *Reacher {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return &Reacher{cfg: cfg, cs: cs, namespace: namespace, selector: AgentSelector, ErrOut: io.Discard}
}

// Namespace is the agents' namespace.
func (r *Reacher) Namespace() string { return r.namespace }

// SetSelector replaces AgentSelector (a chart installed with nameOverride
// labels its pods app.kubernetes.io/name=<override>).
func (r *Reacher) SetSelector(selector string) error {
	if _, err := labels.Parse(selector); err != nil || selector == "" {
		return fmt.Errorf("agent selector %q: want a label selector such as %s", selector, AgentSelector)
	}
	r.selector = selector
	return nil
}

// Reach finds node's agent pod and port-forwards a local port to its plain
// HTTP port. baseURL is "http://127.0.0.1:PORT"; release stops the forward
// (call it once the answers are read). It has the signature of cli.Env's
// Reach.
func (r *Reacher) Reach(ctx context.Context, node string) (baseURL string, release func(), err error) {
	if node == "" {
		return "", nil, errors.New("no node given: name one with --node (kubectl get nodes lists them)")
	}
	pod, err := findAgentPod(ctx, r.cs, r.namespace, r.selector, node)
	if err != nil {
		return "", nil, err
	}
	port := agentPort(pod)
	errs := &lastError{}
	local, release, err := r.forward(ctx, pod.Name, port, errs)
	if err != nil {
		return "", nil, r.explainForwardError(ctx, pod.Name, node, err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", local)
	if err := probe(ctx, base, errs); err != nil {
		release()
		return "", nil, fmt.Errorf("the agent on node %q does not answer on port %d of pod %s/%s (Running): %w; see kubectl -n %s logs %s",
			node, port, r.namespace, pod.Name, err, r.namespace, pod.Name)
	}
	return base, release, nil
}
