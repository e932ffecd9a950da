// Command kubectl-netdrift is the kubectl plugin: `kubectl netdrift`.
// It asks one node's agent through the API server with the user's
// kubeconfig and RBAC (status, drift, explain, lag, rsts --node NODE: the
// responder commands of internal/cli, reached through internal/reach), and
// answers across nodes from the agents' NodeReports (cluster ...).
package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/netdrift/netdrift/internal/cli"
	"github.com/netdrift/netdrift/internal/clustercmd"
	"github.com/netdrift/netdrift/internal/reach"
)

// Set at link time, as netdrift's (the Makefile's build target).
var version, commit, buildDate string

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the plugin and returns the exit status (internal/cli's).
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Execute(context.Background(), newRoot(), args, stdout, stderr)
}

// localOnly are netdrift's commands that read this machine (captures, the
// kernel): the plugin runs on a laptop and leaves them out.
var localOnly = map[string]bool{"diff": true, "snapshot": true, "trace-rsts": true}

func newRoot() *cobra.Command {
	kube := genericclioptions.NewConfigFlags(true)
	// -n is explain's Service namespace, as in netdrift; the agents'
	// namespace is --agent-namespace. --cluster is not needed by a command
	// left here, and kubectl's meaning would be surprising beside netdrift's.
	kube.Namespace, kube.ClusterName = nil, nil
	a := &agents{kube: kube}
	ver := cli.BuildVersion(version, commit, buildDate)
	env := cli.Env{Reach: a.reach, Version: ver}
	root := cli.NewRoot("kubectl netdrift", env,
		clustercmd.NewCommand(clustercmd.Options{RESTConfig: kube.ToRESTConfig, PluginVersion: ver.Version}))
	for _, c := range root.Commands() {
		if localOnly[c.Name()] {
			root.RemoveCommand(c)
		} else if c.Flags().Lookup("node") != nil {
			_ = c.MarkFlagRequired("node") // a laptop has no local agent
		}
	}
	root.Short = "Ask netdrift agents from anywhere kubectl works"
	root.Long = "Ask one node's netdrift agent through the API server (--node NODE: a port-forward to the agent\n" +
		"pod, with your kubeconfig and RBAC: get/list pods and get/create pods/portforward in the agents'\n" +
		"namespace), or answer across nodes from the agents' NodeReports (cluster ...)."
	pf := root.PersistentFlags()
	kube.AddFlags(pf)
	pf.StringVar(&a.namespace, "agent-namespace", reach.DefaultNamespace, "the `NAMESPACE` the agents run in")
	pf.StringVar(&a.selector, "agent-selector", reach.AgentSelector, "label `SELECTOR` of the agent pods (the chart's DaemonSet)")
	return root
}

// agents reaches a node's agent with the plugin's flags.
type agents struct {
	kube                *genericclioptions.ConfigFlags
	namespace, selector string
}

// reach is cli.Env.Reach: the node's agent pod, port-forwarded.
func (a *agents) reach(ctx context.Context, node string) (string, func(), error) {
	cfg, err := a.kube.ToRESTConfig()
	if err != nil {
		return "", nil, err
	}
	r, err := reach.New(cfg, a.namespace)
	if err == nil {
		err = r.SetSelector(a.selector)
	}
	if err != nil {
		return "", nil, err
	}
	return r.Reach(ctx, node)
}
