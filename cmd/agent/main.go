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

	"github.com/netdrift/netdrift/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func commands() []cli.Command {
	return append([]cli.Command{{Name: "agent", Help: "run the per-node agent (DaemonSet)", Run: runAgent}},
		append(cli.Commands(cli.Env{ServicesFromAPI: servicesFromAPI}),
			cli.Command{Name: "version", Help: "print the version", Run: func(_ []string, out, _ io.Writer) int { fmt.Fprintln(out, version); return 0 }})...)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return cli.ExitError
	}
	for _, c := range commands() {
		if c.Name == args[0] {
			return c.Run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "netdrift: unknown command %q\n", args[0])
	usage(stderr)
	return cli.ExitError
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: netdrift <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.Name, c.Help)
	}
}
