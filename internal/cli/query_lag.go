package cli

import (
	"fmt"
	"io"
	"sort"

	"github.com/netdrift/netdrift/internal/api"
)

// RunLag is `netdrift lag`: the lag per change kind, the recent samples and
// the changes not yet programmed (/v1/lag).
func RunLag(args []string, stdout, stderr io.Writer) int {
	var l api.Lag
	q, ok := fetch("lag", "/v1/lag", args, stderr, &l)
	if !ok {
		return ExitError
	}
	code := sayNoView(q, l.View, stdout, stderr, ExitOK)
	if q.out == "json" {
		printJSON(stdout, l)
		return code
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
			e50, e99 = seconds(e.P50), seconds(e.P99)
		}
		t.add(k, fmt.Sprint(n.Count), seconds(n.P50), seconds(n.P99), seconds(n.Max), e50, e99)
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
				e2e = seconds(*x.NetworkLatencySeconds)
			}
			s.add(x.Service, x.Change, clock(x.T1), seconds(x.NodeLagSeconds), e2e)
		}
		s.write(stdout)
	}
	for _, p := range l.Pending {
		fmt.Fprintf(stdout, "pending: %s %s for %s\n", p.Service, p.Change, seconds(p.AgeSeconds))
	}
	return code
}
