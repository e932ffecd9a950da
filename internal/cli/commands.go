package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/netdrift/netdrift/internal/api"
)

// Env is what a front end hands the responder commands: the parts that
// need client-go (which lives in the binaries), and how to reach an agent
// by node name.
type Env struct {
	// ServicesFromAPI resolves Service addresses for trace-rsts (nil: only
	// --cluster files).
	ServicesFromAPI ServicesLister
	// Reach makes the agent of node reachable for the query commands
	// (status, drift, explain, lag, rsts) given --node NODE: it returns
	// the base URL to query in place of --agent (e.g. http://127.0.0.1:PORT
	// of a port-forward) and release, which the command calls (when not
	// nil) once its request is done. An error is printed and the command
	// exits 2. nil: --node is refused, exit 2, naming the kubectl plugin.
	Reach func(ctx context.Context, node string) (baseURL string, release func(), err error)
	// Version is what `version` prints; empty members are filled from the
	// binary's build information (BuildVersion).
	Version api.Version
}

// NewCommands are the responder commands, in the order help lists them:
// status, drift, explain, lag, rsts (ask a running agent), diff, snapshot
// (read captures), trace-rsts (count RSTs without a cluster) and version.
// Each returns its exit status through Execute (NewRoot).
func NewCommands(env Env) []*cobra.Command {
	return []*cobra.Command{
		newQueryCommand(env, "status", "show a running agent's status", runStatus),
		newQueryCommand(env, "drift", "show a running agent's current findings (exit 1 when there are stale ones)", runDrift),
		newExplainCommand(env),
		newQueryCommand(env, "lag", "show convergence lag samples and percentiles", runLag),
		newQueryCommand(env, "rsts", "show RSTs sent from/to terminating pods", runRSTs),
		newDiffCommand(),
		newSnapshotCommand(),
		newTraceRSTsCommand(env.ServicesFromAPI),
		newVersionCommand(env.Version),
	}
}

// newQueryCommand is a query command without arguments.
func newQueryCommand(env Env, use, short string, run func(*queryFlags, io.Writer, io.Writer) int) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: exactArgs(0)}
	q := newQuery(cmd, env)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return q.run(cmd, func(stdout, stderr io.Writer) int { return run(q, stdout, stderr) })
	}
	return cmd
}

func newExplainCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "explain NAMESPACE/NAME",
		Short:   "explain one service on the agent's node: desired and observed verdicts, endpoints, findings",
		Example: "  netdrift explain shop/web\n  netdrift explain web -n shop -o yaml",
		Args:    exactArgs(1),
	}
	q := newQuery(cmd, env)
	var namespace string
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the service's `NAMESPACE` (with a NAME argument)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ns, name, err := serviceArg(args[0], namespace)
		if err != nil {
			return err
		}
		return q.run(cmd, func(stdout, stderr io.Writer) int { return runExplain(q, ns, name, stdout, stderr) })
	}
	return cmd
}

// Run runs the responder command line args (args[0] the command) as the
// netdrift binary would, and reports whether args[0] is a responder
// command; a front end builds its tree with NewRoot and runs it with
// Execute instead.
func Run(env Env, args []string, stdout, stderr io.Writer) (int, bool) {
	if len(args) == 0 {
		return ExitError, false
	}
	for _, c := range NewCommands(env) {
		if c.Name() == args[0] {
			return Execute(context.Background(), NewRoot("netdrift", env), args, stdout, stderr), true
		}
	}
	return ExitError, false
}
