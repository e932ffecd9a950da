package cli

import (
	"context"
	"io"
)

// run runs the command line args of a `netdrift` front end over env and
// returns its exit status, as the binary does.
func run(env Env, args []string, stdout, stderr io.Writer) int {
	return Execute(context.Background(), NewRoot("netdrift", env), args, stdout, stderr)
}
