package main

import (
	"testing"

	"github.com/netdrift/netdrift/internal/cli"
	"github.com/netdrift/netdrift/internal/testutil/doccmd"
)

// docFiles are the pages whose code blocks show command lines.
var docFiles = []string{"../../README.md", "../../docs/runbook.md", "../../docs/install.md",
	"../../docs/api.md", "../../docs/architecture.md", "../../lab/README.md"}

// TestDocumentedCommandsParse: every `netdrift ...` command line in a code
// block of the docs names a command that exists, with flags it defines and
// as many arguments as it takes — parsed by the binary's own command tree,
// so a renamed flag or command fails here, not in a responder's terminal.
func TestDocumentedCommandsParse(t *testing.T) {
	doccmd.Check(t, docFiles, "netdrift", 15, func(args []string) error {
		root := cli.NewRoot("netdrift", cli.Env{}, newAgentCommand())
		return cli.ParseOnly(root, args)
	})
}
