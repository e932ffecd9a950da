package cli

import (
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/netdrift/netdrift/internal/api"
)

// runRSTs is `netdrift rsts`: the RST counts by service and state and the
// sampled events (/v1/rsts). -o wide: q.wide().
func runRSTs(q *queryFlags, stdout, stderr io.Writer) int {
	var r api.RSTReport
	if !fetch(q, "/v1/rsts", stderr, &r) {
		return ExitError
	}
	code := sayNoView(q, r.View, stdout, stderr, ExitOK)
	if q.document() {
		q.print(stdout, r)
		return code
	}
	printRSTs(stdout, r, q.wide())
	return code
}

// shownEvents is how many of the latest RST events the narrow table shows.
const shownEvents = 20

// printRSTs is rsts' tables: the counts per service and state and the
// latest sampled events (wide: every event, with its time in RFC 3339).
func printRSTs(w io.Writer, r api.RSTReport, wide bool) {
	fmt.Fprintf(w, "rst probe %s %s  watched %d\n", upDown(r.Probe.Up), r.Probe.Mode, len(r.Watched))
	keys := make([]string, 0, len(r.Totals))
	for k := range r.Totals {
		keys = append(keys, k)
	}
	for k := range r.ByState {
		if _, ok := r.Totals[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	// RSTS: terminating + deleted (netdrift_terminating_rsts_total).
	t := newTable("SERVICE", "RSTS", "TERMINATING", "DELETED", "READY", "REFUSED READY", "NOT READY").limit(30, 8, 11, 7, 8, 13, 9).wide(wide)
	for _, k := range keys {
		b := r.ByState[k]
		t.add(k, fmt.Sprint(r.Totals[k]), fmt.Sprint(b.Terminating), fmt.Sprint(b.Deleted), fmt.Sprint(b.Ready),
			fmt.Sprint(b.ReadyRefusals), fmt.Sprint(b.NotReady))
	}
	t.write(w)
	if r.Unsettled > 0 {
		fmt.Fprintf(w, "unsettled: %d RSTs sent before any known deletion request, not yet counted as ready or terminating\n", r.Unsettled)
	}
	if r.RecommendedPreStopSeconds != nil {
		fmt.Fprintf(w, "recommended preStop sleep: %s\n", preStop(*r.RecommendedPreStopSeconds))
	}
	if len(r.Events) > 0 {
		fmt.Fprintf(w, "events: rate-limited samples (%d not sampled); the totals count every RST\n",
			r.EventSamples.DroppedRateLimited+r.EventSamples.DroppedRingFull+r.EventSamples.Evicted)
		writeRSTEvents(w, r.Events, wide)
	}
}

func writeRSTEvents(w io.Writer, events []api.RSTEvent, wide bool) {
	shown, earlier := lastN(events, shownEvents, wide)
	if earlier > 0 {
		fmt.Fprintln(w, moreNote(earlier, "earlier events"))
	}
	// 12+8+26+14+21+9 columns + 5 gaps of 2 = 100.
	e := newTable("TIME", "POD", "RST", "SERVICE", "CLIENT", "AFTER DEL").limit(12, 26, 8, 14, 21, 9).wide(wide)
	for _, ev := range shown {
		at := clock(ev.Time)
		if wide {
			at = timestamp(ev.Time)
		}
		e.add(at, ev.Namespace+"/"+ev.Pod, rstDirection(ev.Direction), dash(ev.Service), ev.Client, age(ev.SecondsSinceDeletion))
	}
	e.write(w)
}

// rstDirection says what the watched pod did, short enough for the table.
func rstDirection(d string) string {
	switch d {
	case "sent_by_watched":
		return "sent"
	case "sent_to_watched":
		return "received"
	case "both_watched":
		return "both"
	}
	return d
}

// preStop is a recommended preStop sleep: whole seconds, as a pod spec
// takes them.
func preStop(v float64) string { return seconds(math.Round(v)) }
