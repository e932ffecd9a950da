package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/netdrift/netdrift/internal/rst"
)

func RunTraceRSTs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trace-rsts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ips := fs.String("ip", "", "IP[,IP...] to watch (pod IPs, or a Service VIP)")
	port := fs.Uint("port", 0, "only RSTs on this port of the watched address (0 = any)")
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := rst.TraceOptions{IPs: list, Port: uint16(*port), Duration: *dur, JSON: *out == "json", Mode: m}
	if err := rst.RunTrace(ctx, opts, stdout); err != nil {
		fmt.Fprintln(stderr, "netdrift trace-rsts:", err)
		return ExitError
	}
	return ExitOK
}
