package cli

import (
	"bytes"
	"context"
	"encoding/json"
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
	opts := rst.TraceOptions{IPs: list, Port: watchPort, Duration: *dur, JSON: *out == "json", Mode: m}
	if err := runTrace(ctx, opts, resolved, stdout); err != nil {
		if capture.IsPermission(err) && !strings.Contains(err.Error(), "CAP_") {
			err = capture.ProbeHint(err)
		}
		fmt.Fprintln(stderr, "netdrift trace-rsts:", err)
		return ExitError
	}
	return ExitOK
}

// runTrace runs the trace and says which backends were watched for each
// Service address: lines before the table, or a "services" member of the
// JSON report.
func runTrace(ctx context.Context, opts rst.TraceOptions, resolved []vipBackends, stdout io.Writer) error {
	if len(resolved) == 0 {
		return rst.RunTrace(ctx, opts, stdout)
	}
	var buf bytes.Buffer
	if err := rst.RunTrace(ctx, opts, &buf); err != nil {
		return err
	}
	if !opts.JSON {
		_, err := io.WriteString(stdout, describeVIPs(resolved)+buf.String())
		return err
	}
	var rep map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
		return err
	}
	svcs, err := json.Marshal(resolved)
	if err != nil {
		return err
	}
	rep["services"] = svcs
	printJSON(stdout, rep)
	return nil
}
