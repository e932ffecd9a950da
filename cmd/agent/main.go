// Command netdrift is the netdrift agent and its responder CLI.
//
//	netdrift agent      run the per-node daemon
//	netdrift status|drift|explain|lag|rsts   query a running agent
//	netdrift diff       analyse captured dumps offline
//	netdrift snapshot   print what the datapath holds
//	netdrift trace-rsts count RSTs for given IPs without a cluster
//	netdrift version    print the build
//	netdrift completion bash|zsh|fish|powershell
package main

import (
	"context"
	"io"
	"os"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/cli"
)

// Set at link time: -ldflags "-X main.version=... -X main.commit=...
// -X main.buildDate=..." (the Makefile's build target, the Dockerfile);
// what is left empty comes from the binary's build information.
var version, commit, buildDate string

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// build is this binary's version, commit, build date and Go version.
func build() api.Version { return cli.BuildVersion(version, commit, buildDate) }

func run(args []string, stdout, stderr io.Writer) int {
	env := cli.Env{ServicesFromAPI: servicesFromAPI, Version: build()}
	return cli.Execute(context.Background(), cli.NewRoot("netdrift", env, newAgentCommand()), args, stdout, stderr)
}
