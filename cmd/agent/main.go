// Command netdrift is the netdrift agent and its responder CLI.
package main

import (
	"fmt"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr *os.File) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	fmt.Fprintf(stderr, "netdrift: unknown command %q\n%s\n", args[0], usage)
	return 2
}

const usage = `usage: netdrift <command> [flags]`
