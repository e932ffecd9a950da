package cli

import (
	"bytes"
	"context"
	"io"
	"testing"
)

// run runs the command line args of a `netdrift` front end over env and
// returns its exit status, as the binary does.
func run(env Env, args []string, stdout, stderr io.Writer) int {
	return Execute(context.Background(), NewRoot("netdrift", env), args, stdout, stderr)
}

// TestRunResponderCommands: Run runs a responder command as the binary
// does and says which command lines it does not know.
func TestRunResponderCommands(t *testing.T) {
	var out, errb bytes.Buffer
	if code, ok := Run(Env{}, []string{"version", "-o", "json"}, &out, &errb); code != ExitOK || !ok || !bytes.Contains(out.Bytes(), []byte(`"kind": "Version"`)) {
		t.Errorf("Run version: %d %v %q %q", code, ok, out.String(), errb.String())
	}
	for _, args := range [][]string{nil, {"agent"}, {"--help"}} {
		if code, ok := Run(Env{}, args, &out, &errb); code != ExitError || ok {
			t.Errorf("Run %q: %d %v, want 2 and not a responder command", args, code, ok)
		}
	}
}
