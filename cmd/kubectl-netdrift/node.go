package main

// The per-node responder commands: --node resolves to the agent through
// internal/reach, and the existing responder command runs against the
// forwarded address (cli.Run with --agent). This file is the only glue
// between the plugin and internal/cli.

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/netdrift/netdrift/internal/cli"
	"github.com/netdrift/netdrift/internal/reach"
)

// nodeCommand describes one responder command the plugin offers.
type nodeCommand struct {
	name, short string
	args        int // positional arguments
	use         string
}

var nodeCommandList = []nodeCommand{
	{"status", "show a node's agent status", 0, "status --node NODE"},
	{"drift", "show a node's current findings", 0, "drift --node NODE"},
	{"explain", "explain one service on a node", 1, "explain NAMESPACE/NAME --node NODE"},
	{"lag", "show a node's convergence lag samples and percentiles", 0, "lag --node NODE"},
	{"rsts", "show RSTs sent from/to terminating pods on a node", 0, "rsts --node NODE"},
}

func nodeCommands(kube *genericclioptions.ConfigFlags, code *int) []*cobra.Command {
	var out []*cobra.Command
	for _, nc := range nodeCommandList {
		var node, output, selector string
		c := &cobra.Command{
			Use: nc.use, Short: nc.short, Args: cobra.ExactArgs(nc.args),
			RunE: func(c *cobra.Command, args []string) error {
				if node == "" {
					return errNoNode
				}
				*code = askNode(c, kube, nc.name, node, output, selector, args)
				return nil
			},
		}
		c.Flags().StringVar(&node, "node", "", "the node whose agent to ask")
		c.Flags().StringVarP(&output, "output", "o", "table", "output: table or json")
		c.Flags().StringVar(&selector, "agent-selector", reach.AgentSelector, "label selector of the agent pods (the chart's DaemonSet)")
		out = append(out, c)
	}
	return out
}

// askNode reaches node's agent and runs the responder command against it.
func askNode(c *cobra.Command, kube *genericclioptions.ConfigFlags, name, node, output, selector string, args []string) int {
	cfg, err := kube.ToRESTConfig()
	if err != nil {
		c.PrintErrf("kubectl netdrift %s: %v\n", name, err)
		return cli.ExitError
	}
	r, err := reach.New(cfg, agentNamespace(kube))
	if err == nil {
		err = r.SetSelector(selector)
	}
	if err != nil {
		c.PrintErrf("kubectl netdrift %s: %v\n", name, err)
		return cli.ExitError
	}
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	defer cancel()
	base, release, err := r.Reach(ctx, node)
	if err != nil {
		c.PrintErrf("kubectl netdrift %s: %v\n", name, err)
		return cli.ExitError
	}
	defer release()
	code, _ := cli.Run(cli.Env{}, append([]string{name, "--agent", base, "-o", output}, args...), c.OutOrStdout(), c.ErrOrStderr())
	return code
}
