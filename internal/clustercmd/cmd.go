package clustercmd

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/netdrift/netdrift/internal/cli"
)

// Exit statuses, those of the responder commands (internal/cli): 0 nothing
// found, 1 findings (drifting nodes; for status, agents that are not ok),
// 2 error, 3 nothing found but some nodes could not answer.
const (
	ExitOK       = cli.ExitOK
	ExitFindings = cli.ExitFindings
	ExitError    = cli.ExitError
	ExitNoView   = cli.ExitNoView
)

// ExitCode is the process exit status for a command's error: 0 for nil,
// the answer's status, or ExitError for any other error.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	if code, ok := cli.StatusOf(err); ok {
		return code
	}
	return ExitError
}

// IsAnswer reports whether err only carries an answer's exit status
// (nothing to print).
func IsAnswer(err error) bool {
	_, ok := cli.StatusOf(err)
	return ok
}

// status is the error a command returns for an answer's exit status
// (cli.Execute turns it into the process's status).
func status(code int) error {
	if code == ExitOK {
		return nil
	}
	return cli.ExitCode(code)
}

// Options are what the commands need from the plugin.
type Options struct {
	// RESTConfig returns the user's API server configuration (kubeconfig,
	// --context, ...).
	RESTConfig    func() (*rest.Config, error)
	PluginVersion string
	Timeout       time.Duration
}

type flags struct {
	selector string
	output   string
	backend  string
	service  string
}

// NewCommand returns `cluster` and its subcommands.
func NewCommand(o Options) *cobra.Command {
	f := &flags{}
	root := &cobra.Command{
		Use:   "cluster",
		Short: "Answer across nodes from the agents' NodeReports (one LIST)",
		Long: "Answer across nodes from one LIST of NodeReports (netdrift.io/v1alpha1, one per node, written by\n" +
			"the agents) and one LIST of Nodes. Nodes without a report have no agent publishing; a report whose\n" +
			"heartbeat is older than 3 of its intervals is stale.",
	}
	root.PersistentFlags().StringVarP(&f.selector, "selector", "l", "", "label selector of the nodes to ask about (as kubectl get nodes -l)")
	root.PersistentFlags().StringVarP(&f.output, "output", "o", "table", "output: table, json or yaml")
	drift := &cobra.Command{
		Use:   "drift",
		Short: "Nodes whose datapath differs from the API (--backend: the nodes that still DNAT to IP)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if _, err := newMatcher(DriftQuery{Backend: f.backend, Service: f.service}); err != nil {
				return err // before any request
			}
			return o.run(c, f, runDrift)
		},
	}
	drift.Flags().StringVar(&f.backend, "backend", "", "a backend IP or IP:port: only stale_backend findings to it (nodes that still DNAT to it)")
	drift.Flags().StringVar(&f.service, "service", "", "NAMESPACE/NAME: only this Service's findings")
	root.AddCommand(&cobra.Command{
		Use: "status", Short: "Every node's agent: missing, stale, blind, out of date, findings", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return o.run(c, f, runStatus) },
	}, drift, &cobra.Command{
		Use: "lag", Short: "Convergence lag per node (p50/p90/p99), worst first", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return o.run(c, f, runLag) },
	})
	return root
}

type runner func(w io.Writer, in Input, f *flags) (int, error)

func (o Options) run(c *cobra.Command, f *flags, run runner) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	cfg, err := o.RESTConfig()
	if err != nil {
		return err
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(c.Context(), timeout)
	defer cancel()
	in, err := load(ctx, cfg, f.selector, o.PluginVersion)
	if err != nil {
		return err
	}
	code, err := run(c.OutOrStdout(), in, f)
	if err != nil {
		return err
	}
	return status(code)
}

func runStatus(w io.Writer, in Input, f *flags) (int, error) {
	s := Status(in)
	code := ExitOK
	if s.Summary.Problems() > 0 {
		code = ExitFindings
	}
	if done, err := encode(w, f.output, s); done {
		return code, err
	}
	return code, printStatus(w, s)
}

func runDrift(w io.Writer, in Input, f *flags) (int, error) {
	d, err := Drift(in, DriftQuery{Backend: f.backend, Service: f.service})
	if err != nil {
		return ExitError, err
	}
	code := ExitOK
	switch {
	case d.Summary.Drifting > 0:
		code = ExitFindings
	case d.Summary.Unknown > 0:
		code = ExitNoView
	}
	if done, err := encode(w, f.output, d); done {
		return code, err
	}
	return code, printDrift(w, d)
}

func runLag(w io.Writer, in Input, f *flags) (int, error) {
	l := Lag(in)
	if done, err := encode(w, f.output, l); done {
		return ExitOK, err
	}
	return ExitOK, printLag(w, l)
}
