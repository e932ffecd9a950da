package cli

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/netdrift/netdrift/internal/capture"
	"github.com/netdrift/netdrift/internal/rst"
)

// traceFlags are the flags of `netdrift trace-rsts`.
type traceFlags struct {
	ips      string
	port     uint
	clusters []string
	kube     KubeConfig
	dur      time.Duration
	mode     string
	watch    bool
	*output
}

// newTraceRSTsCommand is trace-rsts; list resolves Service addresses
// through the API (nil: only --cluster files).
func newTraceRSTsCommand(list ServicesLister) *cobra.Command {
	f := &traceFlags{}
	cmd := &cobra.Command{
		Use:   "trace-rsts --ip IP[,IP...]",
		Short: "count RSTs for given IPs for a while, without a cluster",
		Example: "  netdrift trace-rsts --ip 10.244.1.13 --duration 1m\n" +
			"  netdrift trace-rsts --ip 10.96.0.10 --port 53 --kubeconfig ~/.kube/config",
		Args: exactArgs(0),
	}
	fs := cmd.Flags()
	fs.StringVar(&f.ips, "ip", "", "`IP[,IP...]` to watch: pod IPs, or a Service's address with --cluster or a kubeconfig (its backends are watched)")
	fs.UintVar(&f.port, "port", 0, "only RSTs on this `PORT` of the watched address (0 = any; the Service's port for a Service address)")
	fs.StringArrayVar(&f.clusters, "cluster", nil, "`FILE` of cluster objects (kubectl get services,endpointslices -A -o json) to resolve Service addresses to their backends (repeatable)")
	kube := ClientFlags()
	kube.ClusterName = nil // --cluster names cluster files here; --context selects the kubeconfig's cluster
	f.kube = AddKubeFlags(fs, kube)
	fs.DurationVar(&f.dur, "duration", 30*time.Second, "how long to watch")
	fs.StringVar(&f.mode, "mode", "", "force a probe `MODE`: tracepoint, tp_btf or fentry (default: chosen from kernel features)")
	fs.BoolVar(&f.watch, "watch", false, "print each RST as it arrives (time, sent/received, from -> to, reason); with -o json one JSON object per line")
	_ = cmd.RegisterFlagCompletionFunc("mode", fixedCompletion("auto", "tracepoint", "tp_btf", "fentry"))
	f.output = addOutputFlag(cmd, outTable, outJSON)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := f.check(); err != nil {
			return err
		}
		return exit(runTraceRSTs(cmd.Context(), list, f, cmd.OutOrStdout(), cmd.ErrOrStderr()))
	}
	return cmd
}

// runTraceRSTs runs trace-rsts with its flags.
func runTraceRSTs(ctx context.Context, lister ServicesLister, f *traceFlags, stdout, stderr io.Writer) int {
	list, err := rst.ParseIPList(f.ips)
	if err != nil || f.port > 65535 || f.dur <= 0 {
		fmt.Fprintln(stderr, "netdrift trace-rsts: need --ip IP[,IP...], a --port below 65536 and a positive --duration:", err)
		return ExitError
	}
	m, err := rst.ParseMode(f.mode)
	if err != nil && f.mode != "" {
		fmt.Fprintln(stderr, "netdrift trace-rsts:", err)
		return ExitError
	}
	watchPort := uint16(f.port)
	var resolved []vipBackends
	cs, err := traceCluster(lister, f.clusters, f.kube)
	if err == nil && cs != nil {
		list, watchPort, resolved, err = resolveVIPs(cs, list, watchPort)
	}
	if err != nil {
		fmt.Fprintln(stderr, "netdrift trace-rsts:", err)
		return ExitError
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := rst.TraceOptions{IPs: list, Port: watchPort, Duration: f.dur, Mode: m}
	o := &traceOutput{stdout: stdout, stderr: stderr, json: f.format == outJSON, watch: f.watch, resolved: resolved,
		ips: list, port: watchPort, duration: f.dur}
	if err := runTrace(ctx, opts, o); err != nil {
		if capture.IsPermission(err) && !strings.Contains(err.Error(), "CAP_") {
			err = capture.ProbeHint(err)
		}
		fmt.Fprintln(stderr, "netdrift trace-rsts:", err)
		return ExitError
	}
	return ExitOK
}

// runTrace runs the trace, printing through o: the attach line, the
// events with --watch, the counts.
func runTrace(ctx context.Context, opts rst.TraceOptions, o *traceOutput) error {
	opts.Attached = o.attached
	if o.watch {
		opts.Event = o.event
	}
	res, err := rst.Trace(ctx, opts)
	if err != nil {
		return err
	}
	o.result(res)
	return nil
}
