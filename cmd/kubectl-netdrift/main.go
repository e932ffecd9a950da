// Command kubectl-netdrift is the kubectl plugin: `kubectl netdrift`.
// It asks one node's agent through the API server with the user's
// kubeconfig and RBAC (status, drift, explain, lag, rsts --node NODE), and
// answers across nodes from the agents' NodeReports (cluster ...).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/netdrift/netdrift/internal/cli"
	"github.com/netdrift/netdrift/internal/clustercmd"
	"github.com/netdrift/netdrift/internal/reach"
)

var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the plugin and returns the exit status: the answer's (see
// internal/cli), or cli.ExitError after printing an error.
func run(args []string, stdout, stderr io.Writer) int {
	code := cli.ExitOK
	root := newRoot(&code)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	switch {
	case err == nil:
		return code
	case clustercmd.IsAnswer(err):
		return clustercmd.ExitCode(err)
	default:
		fmt.Fprintf(stderr, "kubectl netdrift: %v\n", err)
		return cli.ExitError
	}
}

func newRoot(code *int) *cobra.Command {
	kube := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:   "kubectl-netdrift",
		Short: "Ask netdrift agents from anywhere kubectl works",
		Long: "Ask one node's netdrift agent through the API server (a port-forward to the agent pod, with your\n" +
			"kubeconfig and RBAC: get/list pods and create pods/portforward in the agents' namespace), or\n" +
			"answer across nodes from the agents' NodeReports (cluster ...).\n\n" +
			"-n names the agents' namespace (default \"" + reach.DefaultNamespace + "\", not the kubeconfig's).",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl netdrift"},
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	kube.AddFlags(root.PersistentFlags())
	for _, c := range nodeCommands(kube, code) {
		root.AddCommand(c)
	}
	root.AddCommand(clustercmd.NewCommand(clustercmd.Options{RESTConfig: kube.ToRESTConfig, PluginVersion: version}))
	return root
}

// agentNamespace is -n when given, else the chart's namespace.
func agentNamespace(kube *genericclioptions.ConfigFlags) string {
	if kube.Namespace != nil && *kube.Namespace != "" {
		return *kube.Namespace
	}
	return reach.DefaultNamespace
}

var errNoNode = errors.New("--node is required: the node whose agent to ask (kubectl get nodes lists them; `kubectl netdrift cluster status` shows every agent)")
