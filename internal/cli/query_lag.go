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
	printLag(stdout, l, q.wide())
	return code
}

// shownSamples is how many of the latest lag samples the narrow table shows.
const shownSamples = 20

// printLag is lag's tables: the percentiles per change kind, the latest
// samples (wide: every sample, with the trigger, delivery and programming
// times in RFC 3339) and the changes not yet programmed.
func printLag(w io.Writer, l api.Lag, wide bool) {
	fmt.Fprintf(w, "node %s  samples %d  pending %d\n", l.Node, len(l.Samples), len(l.Pending))
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
	t.write(w)
	if len(l.Samples) > 0 {
		fmt.Fprintln(w)
		writeLagSamples(w, l.Samples, wide)
	}
	for _, p := range l.Pending {
		line := fmt.Sprintf("pending: %s %s for %s", p.Service, p.Change, seconds(p.AgeSeconds))
		if wide {
			line += " (delivered " + timestamp(p.T1) + ")"
		}
		fmt.Fprintln(w, line)
	}
}

func writeLagSamples(w io.Writer, samples []api.LagSample, wide bool) {
	shown, earlier := lastN(samples, shownSamples, wide)
	if earlier > 0 {
		fmt.Fprintln(w, moreNote(earlier, "earlier samples"))
	}
	s := newTable("SERVICE", "CHANGE", "T1 (DELIVERED)", "NODE LAG", "E2E").limit(30, 7, 15, 9, 9)
	if wide {
		s = newTable("SERVICE", "CHANGE", "T0 (TRIGGER)", "T0 SOURCE", "T1 (DELIVERED)", "T2 (PROGRAMMED)", "NODE LAG", "E2E")
	}
	for _, x := range shown {
		e2e := "-"
		if x.NetworkLatencySeconds != nil {
			e2e = seconds(*x.NetworkLatencySeconds)
		}
		if wide {
			s.add(x.Service, x.Change, timestamp(x.T0), dash(x.T0Source), timestamp(x.T1), timestamp(x.T2), seconds(x.NodeLagSeconds), e2e)
			continue
		}
		s.add(x.Service, x.Change, clock(x.T1), seconds(x.NodeLagSeconds), e2e)
	}
	s.write(w)
}
