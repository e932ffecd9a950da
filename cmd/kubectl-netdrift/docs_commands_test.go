package main

import (
	"testing"

	"github.com/netdrift/netdrift/internal/cli"
	"github.com/netdrift/netdrift/internal/testutil/doccmd"
)

// TestDocumentedCommandsParse: every `kubectl netdrift ...` line in a code
// block of the docs parses with the plugin's own command tree (command,
// flags — required ones included — and argument count).
func TestDocumentedCommandsParse(t *testing.T) {
	files := []string{"../../README.md", "../../docs/runbook.md", "../../docs/install.md", "../../docs/api.md"}
	doccmd.Check(t, files, "kubectl netdrift", 10, func(args []string) error {
		root := newRoot()
		if err := cli.ParseOnly(root, args); err != nil {
			return err
		}
		cmd, _, _ := root.Find(args)
		return cmd.ValidateRequiredFlags()
	})
}
