package cli

import (
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"github.com/netdrift/netdrift/internal/api"
)

func RunExplain(args []string, stdout, stderr io.Writer) int {
	q, pos, ok := parseQuery("explain", args, stderr, 1)
	if !ok {
		return ExitError
	}
	ns, name, found := strings.Cut(pos[0], "/")
	if !found || ns == "" || name == "" || strings.Contains(name, "/") {
		fmt.Fprintln(stderr, "netdrift explain: want NAMESPACE/NAME")
		return ExitError
	}
	var v api.ServiceView
	if !q.get("/v1/services/"+url.PathEscape(ns)+"/"+url.PathEscape(name), &v, stderr, "explain") {
		return ExitError
	}
	if q.out == "json" {
		printJSON(stdout, v)
	} else {
		printExplain(stdout, v)
	}
	if !v.Exists && len(v.Frontends) == 0 {
		return ExitError
	}
	return ExitOK
}

func printExplain(w io.Writer, v api.ServiceView) {
	if !v.Exists && len(v.Frontends) == 0 {
		fmt.Fprintf(w, "service %s: not known to the agent and nothing programmed for it\n", v.Service)
		return
	}
	fmt.Fprintf(w, "service %s  exists %s\n\n", v.Service, yesNo(v.Exists))
	t := newTable("FRONTEND", "KIND", "PORT", "DESIRED", "OBSERVED", "MATCH").limit(24, 13, 10, 22, 22, 5)
	for _, f := range v.Frontends {
		t.add(f.Frontend, f.FrontendKind, f.Port, verdictText(f.Desired), verdictText(f.Observed), yesNo(f.Match))
	}
	t.write(w)
	if len(v.Endpoints) > 0 {
		fmt.Fprintln(w)
		e := newTable("ENDPOINT", "PORT", "NODE", "READY", "SERVING", "TERMINATING", "BACKEND", "WHY").limit(22, 10, 12, 5, 7, 11, 7, 30)
		for _, ep := range v.Endpoints {
			e.add(ep.Address, ep.Port, dash(ep.Node), yesNo(ep.Ready), yesNo(ep.Serving), yesNo(ep.Terminating), yesNo(ep.Included), ep.Reason)
		}
		e.write(w)
	}
	if len(v.Findings)+len(v.PendingMismatches) > 0 {
		fmt.Fprintln(w)
		writeFindings(w, "STALE", v.Findings)
		writeFindings(w, "PENDING", v.PendingMismatches)
	}
	for _, p := range v.Pending {
		fmt.Fprintf(w, "pending %s change, delivered %.1fs ago, not yet programmed\n", p.Change, p.AgeSeconds)
	}
	for _, l := range v.Lag {
		fmt.Fprintf(w, "lag: %s change programmed %.3fs after delivery\n", l.Change, l.NodeLagSeconds)
	}
	if r := v.RSTs; r != nil {
		fmt.Fprintf(w, "RSTs from terminating pods: %d (terminating %d, deleted %d)\n", r.Total, r.Terminating, r.Deleted)
		if r.Ready+r.NotReady > 0 {
			fmt.Fprintf(w, "RSTs from live pods: ready %d (refused on the service port: %d), not ready %d\n",
				r.Ready, r.ReadyRefusals, r.NotReady)
		}
	}
	for _, a := range v.Advice {
		fmt.Fprintln(w, "advice:", a)
	}
}

func verdictText(v *api.Verdict) string {
	if v == nil {
		return "(none)"
	}
	if v.Uncertain != "" {
		return "uncertain"
	}
	if v.Action == "forward" {
		return fmt.Sprintf("forward %d", len(v.Backends))
	}
	return v.Action
}

func RunLag(args []string, stdout, stderr io.Writer) int {
	var l api.Lag
	q, ok := fetch("lag", "/v1/lag", args, stderr, &l)
	if !ok {
		return ExitError
	}
	if q.out == "json" {
		printJSON(stdout, l)
		return ExitOK
	}
	fmt.Fprintf(stdout, "node %s  samples %d  pending %d\n", l.Node, len(l.Samples), len(l.Pending))
	kinds := make([]string, 0, len(l.NodeLag))
	for k := range l.NodeLag {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	t := newTable("CHANGE", "N", "NODE P50", "NODE P99", "NODE MAX", "E2E P50", "E2E P99")
	for _, k := range kinds {
		n, e := l.NodeLag[k], l.NetworkLatency[k]
		e50, e99 := "-", "-" // no trigger times: T2-T0 unknown, not zero
		if e.Count > 0 {
			e50, e99 = secs(e.P50), secs(e.P99)
		}
		t.add(k, fmt.Sprint(n.Count), secs(n.P50), secs(n.P99), secs(n.Max), e50, e99)
	}
	t.write(stdout)
	if len(l.Samples) > 0 {
		fmt.Fprintln(stdout)
		s := newTable("SERVICE", "CHANGE", "T1 (DELIVERED)", "NODE LAG", "E2E").limit(30, 7, 15, 9, 9)
		start := len(l.Samples) - 20
		if start < 0 {
			start = 0
		}
		for _, x := range l.Samples[start:] {
			e2e := "-"
			if x.NetworkLatencySeconds != nil {
				e2e = secs(*x.NetworkLatencySeconds)
			}
			s.add(x.Service, x.Change, x.T1.Format("15:04:05.000"), secs(x.NodeLagSeconds), e2e)
		}
		s.write(stdout)
	}
	for _, p := range l.Pending {
		fmt.Fprintf(stdout, "pending: %s %s for %.1fs\n", p.Service, p.Change, p.AgeSeconds)
	}
	return ExitOK
}

func secs(v float64) string { return fmt.Sprintf("%.3fs", v) }

func RunRSTs(args []string, stdout, stderr io.Writer) int {
	var r api.RSTReport
	q, ok := fetch("rsts", "/v1/rsts", args, stderr, &r)
	if !ok {
		return ExitError
	}
	if q.out == "json" {
		printJSON(stdout, r)
		return ExitOK
	}
	fmt.Fprintf(stdout, "rst probe %s %s  watched %d\n", upDown(r.Probe.Up), r.Probe.Mode, len(r.Watched))
	keys := make([]string, 0, len(r.Totals))
	for k := range r.Totals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for k := range r.ByState {
		if _, ok := r.Totals[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	// RSTS: terminating + deleted (netdrift_terminating_rsts_total).
	t := newTable("SERVICE", "RSTS", "TERMINATING", "DELETED", "READY", "REFUSED READY", "NOT READY").limit(30, 8, 11, 7, 8, 13, 9)
	for _, k := range keys {
		b := r.ByState[k]
		t.add(k, fmt.Sprint(r.Totals[k]), fmt.Sprint(b.Terminating), fmt.Sprint(b.Deleted), fmt.Sprint(b.Ready),
			fmt.Sprint(b.ReadyRefusals), fmt.Sprint(b.NotReady))
	}
	t.write(stdout)
	if r.Unsettled > 0 {
		fmt.Fprintf(stdout, "unsettled: %d RSTs sent before any known deletion request, not yet counted as ready or terminating\n", r.Unsettled)
	}
	if r.RecommendedPreStopSeconds != nil {
		fmt.Fprintf(stdout, "recommended preStop sleep: %.0fs\n", *r.RecommendedPreStopSeconds)
	}
	start := len(r.Events) - 20
	if start < 0 {
		start = 0
	}
	if len(r.Events) > 0 {
		fmt.Fprintf(stdout, "events: rate-limited samples (%d not sampled); the totals count every RST\n",
			r.EventSamples.DroppedRateLimited+r.EventSamples.DroppedRingFull+r.EventSamples.Evicted)
		// 12+8+26+14+21+9 columns + 5 gaps of 2 = 100.
		e := newTable("TIME", "POD", "RST", "SERVICE", "CLIENT", "AFTER DEL").limit(12, 26, 8, 14, 21, 9)
		for _, ev := range r.Events[start:] {
			e.add(ev.Time.Format("15:04:05.000"), ev.Namespace+"/"+ev.Pod, rstDirection(ev.Direction), dash(ev.Service), ev.Client, age(ev.SecondsSinceDeletion))
		}
		e.write(stdout)
	}
	return ExitOK
}

// rstDirection says what the watched pod did, short enough for the table.
func rstDirection(d string) string {
	switch d {
	case "sent_by_watched":
		return "sent"
	case "sent_to_watched":
		return "received"
	}
	return d
}
