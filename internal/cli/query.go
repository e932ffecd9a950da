package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// defaultAgent is the agent's plain local listener (--listen).
const defaultAgent = "http://127.0.0.1:9760"

// queryFlags are shared by the responder commands that ask a running
// agent: where it is (--agent, or --node through Env.Reach), how to reach
// its secure endpoint, and -o.
type queryFlags struct {
	agent string
	node  string
	tlsFlags
	*output
	env  Env
	name string // the command's path, for messages: "netdrift status"
}

// newQuery registers the query flags on cmd.
func newQuery(cmd *cobra.Command, env Env) *queryFlags {
	q := &queryFlags{env: env, output: addOutputFlag(cmd, allOutputs...)}
	fs := cmd.Flags()
	fs.StringVar(&q.agent, "agent", defaultAgent, "the agent's API `URL` (its TLS endpoint: https://NODE_IP:9761, with --agent-token and --agent-ca-file)")
	fs.StringVar(&q.node, "node", "", "ask the agent of this `NODE` through the kubectl plugin (kubectl netdrift), instead of --agent")
	q.tlsFlags.register(fs)
	return q
}

// run checks the flags and runs body with the command's path set.
func (q *queryFlags) run(cmd *cobra.Command, body func(stdout, stderr io.Writer) int) error {
	q.name = cmd.CommandPath()
	if err := q.output.check(); err != nil {
		return err
	}
	if err := q.checkTLS(); err != nil {
		return err
	}
	if q.node != "" && cmd.Flags().Changed("agent") {
		return usagef("--node and --agent name the same thing: give one")
	}
	if q.node != "" && q.env.Reach == nil {
		return usagef("--node needs the kubectl plugin: kubectl netdrift %s --node NODE (or use --agent URL)", cmd.Name())
	}
	return exit(body(cmd.OutOrStdout(), cmd.ErrOrStderr()))
}

// get GETs path from the agent into v; an error is printed and false
// returned. With --node the agent's address comes from Env.Reach, and is
// released after the request.
func (q *queryFlags) get(path string, v any, stderr io.Writer) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	base := q.agent
	if q.node != "" {
		url, release, err := q.env.Reach(ctx, q.node)
		if err != nil {
			fmt.Fprintf(stderr, "%s: reaching the agent of node %s: %v\n", q.name, q.node, err)
			return false
		}
		if release != nil {
			defer release()
		}
		base = url
	}
	c, err := q.client(base, stderr)
	if err == nil {
		err = c.Get(ctx, path, v)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", q.name, tlsHint(err))
		return false
	}
	return true
}

// fetch GETs path into v for a query command without arguments.
func fetch(q *queryFlags, path string, stderr io.Writer, v any) bool {
	return q.get(path, v, stderr)
}

func dash(s string) string {
	if s == "" || s == ":" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func upDown(b bool) string {
	if b {
		return "up"
	}
	return "DOWN"
}
