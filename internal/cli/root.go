package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// exitStatus ends a command with a status other than 0 whose output, if
// any, the command has already written.
type exitStatus struct{ code int }

func (e *exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// ExitCode turns a command's exit status into the error its RunE returns
// (nil for 0): Execute exits with it and prints nothing more.
func ExitCode(code int) error { return exit(code) }

// exit turns a command's status into the error RunE returns (nil for 0).
func exit(code int) error {
	if code == ExitOK {
		return nil
	}
	return &exitStatus{code: code}
}

// usageError is a command line that cannot run: a bad flag, a wrong
// number of arguments, a flag value outside its set. Exit 2, with a hint
// to the command's help.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return &usageError{fmt.Errorf(format, a...)} }

// ExactArgs is cobra.ExactArgs with the project's usage error (exit 2).
func ExactArgs(n int) cobra.PositionalArgs { return exactArgs(n) }

func exactArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("expected %d argument(s), got %d", n, len(args))
		}
		return nil
	}
}

// NewRoot builds the command tree of a netdrift front end: the responder
// commands of NewCommands(env), then extra (the binary's own, such as
// `agent`), and cobra's `completion` and `help`.
//
// name is what help and errors call the program: "netdrift" for the
// binary, "kubectl netdrift" for the kubectl plugin (the first word of a
// multi-word name is not taken as the command's name: the display name
// carries it whole). Run the tree with Execute, which maps errors to the
// exit statuses the project documents: 0 ok, 1 findings, 2 usage or
// refusal, 3 no current view.
//
// `--help`/`-h` print on stdout and exit 0; an unknown flag or command,
// or a wrong number of arguments, prints one line on stderr naming the
// problem and the help to read, and exits 2.
func NewRoot(name string, env Env, extra ...*cobra.Command) *cobra.Command {
	words := strings.Fields(name)
	root := &cobra.Command{
		Use:   words[len(words)-1],
		Short: "netdrift: kube-proxy datapath drift, convergence lag and RSTs of terminating pods",
		Long: name + " compares what the kernel datapath holds with the cluster's EndpointSlices.\n\n" +
			"Exit status: 0 ok, 1 findings, 2 usage error or refusal, 3 the agent answered without a current view.",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: name},
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A bare program name is a usage error: the usage, on stderr, exit 2.
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return exit(ExitError)
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(NewCommands(env)...)
	root.AddCommand(extra...)
	return root
}

// Execute runs root on args with the given streams and returns the exit
// status; stdout carries help and results, stderr errors.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var st *exitStatus
	if errors.As(err, &st) {
		return st.code
	}
	var ue *usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintf(stderr, "%s: %s (see '%s --help')\n", cmd.CommandPath(), oneLine(err.Error()), cmd.CommandPath())
		return ExitError
	}
	fmt.Fprintf(stderr, "%s: %s\n", cmd.CommandPath(), oneLine(err.Error()))
	return ExitError
}

// oneLine folds cobra's multi-line messages ("Did you mean this?") into
// one line.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.ReplaceAll(strings.Join(parts, " "), "Did you mean this? ", "did you mean: ")
}
