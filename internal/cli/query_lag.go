package cli

import (
	"fmt"
	"io"
	"sort"

	"github.com/netdrift/netdrift/internal/api"
)

// runLag is `netdrift lag`: the lag per change kind, the recent samples and
// the changes not yet programmed (/v1/lag). -o wide: q.wide().
func runLag(q *queryFlags, stdout, stderr io.Writer) int {
	var l api.Lag
	if !fetch(q, "/v1/lag", stderr, &l) {
		return ExitError
	}
	code := sayNoView(q, l.View, stdout, stderr, ExitOK)
	if q.document() {
		q.print(stdout, l)
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
	return code
}
