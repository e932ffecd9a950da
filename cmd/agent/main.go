// Command netdrift is the netdrift agent and its responder CLI.
//
//	netdrift agent      run the per-node daemon
//	netdrift status|drift|explain|lag|rsts   query a running agent
//	netdrift diff       analyse captured dumps offline
//	netdrift snapshot   print what the datapath holds
//	netdrift trace-rsts count RSTs for given IPs without a cluster
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses: 0 ok / no findings, 1 findings, 2 error.
const (
	exitOK       = 0
	exitFindings = 1
	exitError    = 2
)

type command struct {
	name, help string
	run        func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"agent", "run the per-node agent (DaemonSet)", runAgent},
		{"status", "show a running agent's status", runStatus},
		{"drift", "show a running agent's current findings", runDrift},
		{"explain", "explain one service on this node: explain NAMESPACE/NAME", runExplain},
		{"lag", "show convergence lag samples and percentiles", runLag},
		{"rsts", "show RSTs sent from/to terminating pods", runRSTs},
		{"diff", "compare captured cluster state and datapath dumps offline", runDiff},
		{"snapshot", "print the observed datapath (from a dump or the live kernel)", runSnapshot},
		{"trace-rsts", "count RSTs for given IPs for a while, without a cluster", runTraceRSTs},
		{"version", "print the version", func(_ []string, out, _ io.Writer) int { fmt.Fprintln(out, version); return 0 }},
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return exitError
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "netdrift: unknown command %q\n", args[0])
	usage(stderr)
	return exitError
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: netdrift <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.help)
	}
}
