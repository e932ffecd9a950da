package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/netdrift/netdrift/internal/capture"
	"github.com/netdrift/netdrift/internal/rst"
)

// RunTraceRSTs is trace-rsts; list resolves Service addresses through the
// API (nil: only --cluster files).
func RunTraceRSTs(lister ServicesLister, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trace-rsts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ips := fs.String("ip", "", "IP[,IP...] to watch: pod IPs, or a Service's address with --cluster or --kubeconfig (its backends are watched)")
	port := fs.Uint("port", 0, "only RSTs on this port of the watched address (0 = any; the Service's port for a Service address)")
	var clusters multiFlag
	fs.Var(&clusters, "cluster", "cluster objects (`kubectl get services,endpointslices -A -o json`) to resolve Service addresses to their backends (repeatable)")
	kubeconfig := fs.String("kubeconfig", "", "resolve Service addresses through the API with this kubeconfig (default: in-cluster config inside a pod; none otherwise)")
	dur := fs.Duration("duration", 30*time.Second, "how long to watch")
	mode := fs.String("mode", "", "force a probe mode (default: chosen from kernel features)")
	out := fs.String("o", "table", "output: table or json")
	watch := fs.Bool("watch", false, "print each RST as it arrives (time, sent/received, from -> to, reason); with -o json one JSON object per line")
	if err := fs.Parse(args); err != nil {
		return ExitError
	}
	if err := checkOutput(*out); err != nil {
		fmt.Fprintln(stderr, "netdrift trace-rsts:", err)
		return ExitError
	}
	list, err := rst.ParseIPList(*ips)
	if err != nil || *port > 65535 || *dur <= 0 {
		fmt.Fprintln(stderr, "netdrift trace-rsts: need --ip IP[,IP...], a --port below 65536 and a positive --duration:", err)
		return ExitError
	}
	m, err := rst.ParseMode(*mode)
	if err != nil && *mode != "" {
		fmt.Fprintln(stderr, "netdrift trace-rsts:", err)
		return ExitError
	}
	watchPort := uint16(*port)
	var resolved []vipBackends
	cs, err := traceCluster(lister, clusters, *kubeconfig)
	if err == nil && cs != nil {
		list, watchPort, resolved, err = resolveVIPs(cs, list, watchPort)
	}
	if err != nil {
		fmt.Fprintln(stderr, "netdrift trace-rsts:", err)
		return ExitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := rst.TraceOptions{IPs: list, Port: watchPort, Duration: *dur, Mode: m}
	o := &traceOutput{stdout: stdout, stderr: stderr, json: *out == "json", watch: *watch, resolved: resolved,
		ips: list, port: watchPort, duration: *dur}
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
