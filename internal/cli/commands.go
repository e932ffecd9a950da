package cli

import (
	"io"
)

// Command is one subcommand of the netdrift binary.
type Command struct {
	Name, Help string
	Run        func(args []string, stdout, stderr io.Writer) int
}

// Commands are the responder commands, in the order usage lists them.
func Commands() []Command {
	return []Command{
		{"status", "show a running agent's status", RunStatus},
		{"drift", "show a running agent's current findings", RunDrift},
		{"explain", "explain one service on this node: explain NAMESPACE/NAME", RunExplain},
		{"lag", "show convergence lag samples and percentiles", RunLag},
		{"rsts", "show RSTs sent from/to terminating pods", RunRSTs},
		{"diff", "compare captured cluster state and datapath dumps offline", RunDiff},
		{"snapshot", "print the observed datapath (from a dump or the live kernel)", RunSnapshot},
		{"trace-rsts", "count RSTs for given IPs for a while, without a cluster", RunTraceRSTs},
	}
}

// Run runs the responder command args[0].
func Run(args []string, stdout, stderr io.Writer) (int, bool) {
	for _, c := range Commands() {
		if len(args) > 0 && c.Name == args[0] {
			return c.Run(args[1:], stdout, stderr), true
		}
	}
	return ExitError, false
}
