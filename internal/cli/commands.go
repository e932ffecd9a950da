package cli

import (
	"io"
)

// Command is one subcommand of the netdrift binary.
type Command struct {
	Name, Help string
	Run        func(args []string, stdout, stderr io.Writer) int
}

// Env is what the binary hands the responder commands: the parts that
// need client-go, which lives in cmd/agent.
type Env struct {
	// ServicesFromAPI resolves Service addresses for trace-rsts (nil: only
	// --cluster files).
	ServicesFromAPI ServicesLister
}

// Commands are the responder commands, in the order usage lists them.
func Commands(env Env) []Command {
	traceRSTs := func(args []string, stdout, stderr io.Writer) int {
		return RunTraceRSTs(env.ServicesFromAPI, args, stdout, stderr)
	}
	return []Command{
		{"status", "show a running agent's status", RunStatus},
		{"drift", "show a running agent's current findings", RunDrift},
		{"explain", "explain one service on this node: explain NAMESPACE/NAME", RunExplain},
		{"lag", "show convergence lag samples and percentiles", RunLag},
		{"rsts", "show RSTs sent from/to terminating pods", RunRSTs},
		{"diff", "compare captured cluster state and datapath dumps offline", RunDiff},
		{"snapshot", "print the observed datapath (from a dump or the live kernel)", RunSnapshot},
		{"trace-rsts", "count RSTs for given IPs for a while, without a cluster", traceRSTs},
	}
}

// Run runs the responder command args[0].
func Run(env Env, args []string, stdout, stderr io.Writer) (int, bool) {
	for _, c := range Commands(env) {
		if len(args) > 0 && c.Name == args[0] {
			return c.Run(args[1:], stdout, stderr), true
		}
	}
	return ExitError, false
}
