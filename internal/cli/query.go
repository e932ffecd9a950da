package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/netdrift/netdrift/internal/api"
)

// queryFlags are shared by the responder commands.
type queryFlags struct {
	agent string
	out   string
}

func parseQuery(name string, args []string, stderr io.Writer, positional int) (*queryFlags, []string, bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	q := &queryFlags{}
	fs.StringVar(&q.agent, "agent", "http://127.0.0.1:9760", "the agent's API address")
	fs.StringVar(&q.out, "o", "table", "output: table or json")
	// Allow flags after the positional argument (explain NS/NAME -o json).
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, nil, false
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	if err := checkOutput(q.out); err != nil {
		fmt.Fprintf(stderr, "netdrift %s: %v\n", name, err)
		return nil, nil, false
	}
	if len(pos) != positional {
		fmt.Fprintf(stderr, "netdrift %s: expected %d argument(s), got %d\n", name, positional, len(pos))
		return nil, nil, false
	}
	return q, pos, true
}

func (q *queryFlags) get(path string, v any, stderr io.Writer, name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := api.NewClient(q.agent).Get(ctx, path, v); err != nil {
		fmt.Fprintf(stderr, "netdrift %s: %v\n", name, err)
		return false
	}
	return true
}

// fetch parses a query command without arguments and GETs path into v.
func fetch(name, path string, args []string, stderr io.Writer, v any) (*queryFlags, bool) {
	q, _, ok := parseQuery(name, args, stderr, 0)
	if !ok || !q.get(path, v, stderr, name) {
		return nil, false
	}
	return q, true
}

func RunStatus(args []string, stdout, stderr io.Writer) int {
	var s api.Status
	q, ok := fetch("status", "/v1/status", args, stderr, &s)
	if !ok {
		return ExitError
	}
	if q.out == "json" {
		printJSON(stdout, s)
	} else {
		printStatus(stdout, s)
	}
	return ExitOK
}

func printStatus(w io.Writer, s api.Status) {
	t := newTable("FIELD", "VALUE").limit(0, 79) // 19 ("recommended preStop") + 2 + 79 = 100
	t.add("node", s.Node)
	t.add("datapath", s.Datapath+"  ("+s.DatapathReason+")")
	t.add("ready", strings.TrimSpace(yesNo(s.Ready)+" "+s.ReadyReason))
	t.add("converged", yesNo(s.Converged))
	watch := yesNo(s.Watch.Healthy) + "  " + s.Watch.Reason
	t.add("watch healthy", watch)
	if s.Watch.LeaseDelaySeconds != nil {
		t.add("lease delay", fmt.Sprintf("%.3fs", *s.Watch.LeaseDelaySeconds))
	}
	t.add("pending changes", fmt.Sprintf("%d (oldest %.1fs)", s.PendingChanges, s.OldestPendingChangeSeconds))
	t.add("stale findings", fmt.Sprint(s.Findings))
	t.add("pending mismatches", fmt.Sprint(s.PendingMismatches))
	if s.RSTProbe != nil {
		t.add("rst probe", strings.TrimSpace(yesNo(s.RSTProbe.Up)+" "+s.RSTProbe.Mode+"  "+s.RSTProbe.Reason))
	}
	if s.RecommendedPreStopSeconds != nil {
		t.add("recommended preStop", fmt.Sprintf("%.0fs", *s.RecommendedPreStopSeconds))
	}
	for _, src := range s.Sources {
		v := fmt.Sprintf("%s  %.3fs", upDown(src.Up), src.DurationSeconds)
		if src.Error != "" {
			v += "  " + src.Error
		}
		t.add("source "+src.Name, v)
	}
	for _, n := range s.Notes {
		t.add("note", n)
	}
	t.write(w)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func upDown(b bool) string {
	if b {
		return "up"
	}
	return "DOWN"
}

func RunDrift(args []string, stdout, stderr io.Writer) int {
	var d api.Drift
	q, ok := fetch("drift", "/v1/drift", args, stderr, &d)
	if !ok {
		return ExitError
	}
	if q.out == "json" {
		printJSON(stdout, d)
	} else {
		printDrift(stdout, d)
	}
	if len(d.Findings) > 0 {
		return ExitFindings
	}
	return ExitOK
}

func printDrift(w io.Writer, d api.Drift) {
	fmt.Fprintf(w, "node %s  datapath %s  findings %d  pending %d\n", d.Node, d.Datapath, len(d.Findings), len(d.Pending))
	writeFindings(w, "STALE", d.Findings)
	writeFindings(w, "PENDING", d.Pending)
	for _, x := range d.Warnings {
		fmt.Fprintf(w, "warning: %s\n", x)
	}
}

func dash(s string) string {
	if s == "" || s == ":" {
		return "-"
	}
	return s
}

func age(s *float64) string {
	if s == nil {
		return "-"
	}
	return (time.Duration(*s * float64(time.Second))).Round(100 * time.Millisecond).String()
}
