package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/netdrift/netdrift/internal/rst"
)

// traceOutput prints trace-rsts: on stderr the line saying counting has
// started; on stdout the Service addresses resolved, each reset as it
// arrives with --watch, and the counts at the end. -o json prints the
// counts as one JSON document, or, with --watch, every event and then the
// counts as JSON Lines (one object per line, "kind" rst or totals).
type traceOutput struct {
	stdout, stderr io.Writer
	json, watch    bool
	resolved       []vipBackends
	ips            []netip.Addr
	port           uint16
	duration       time.Duration
}

// attachedShownIPs is how many watched addresses the attach line names.
const attachedShownIPs = 5

// attached says that the probe counts from now on: a reproduction started
// before this line is not seen.
func (o *traceOutput) attached(st rst.TraceStart) {
	on := "on any port"
	if o.port != 0 {
		on = fmt.Sprintf("on port %d", o.port)
	}
	fmt.Fprintf(o.stderr, "%s rst probe attached (mode %s): counting RSTs for %s %s from now on; resets before this line are not counted. "+
		"Start the reproduction now; Ctrl-C stops (else after %s).\n", timestamp(st.Time), st.Mode, ipList(o.ips, attachedShownIPs), on, duration(o.duration))
	if o.json {
		return
	}
	if len(o.resolved) > 0 {
		io.WriteString(o.stdout, describeVIPs(o.resolved))
	}
	if o.watch {
		fmt.Fprintf(o.stdout, "%-24s  %-8s  %s\n", "TIME", "RST", "FROM -> TO  REASON")
	}
}

// ipList names the first n addresses, and how many more there are.
func ipList(ips []netip.Addr, n int) string {
	names := make([]string, 0, n)
	for i, ip := range ips {
		if i == n {
			return strings.Join(names, ", ") + fmt.Sprintf(" and %d more (all in the counts)", len(ips)-n)
		}
		names = append(names, ip.String())
	}
	return strings.Join(names, ", ")
}

// traceEvent is one --watch line of -o json.
type traceEvent struct {
	Kind      string    `json:"kind"` // "rst"
	Time      time.Time `json:"time"`
	Direction string    `json:"direction"` // sent_by_watched, sent_to_watched, both_watched
	From      string    `json:"src"`
	To        string    `json:"dst"`
	Reason    string    `json:"reason"`
	Source    string    `json:"source"` // the probe's hook: tracepoint, v4_reply, v6_reply, active
}

// event prints one reset (--watch): its time, what the watched address
// did (sent or received it), who sent it to whom, and the kernel's reason.
func (o *traceOutput) event(ev rst.Event) {
	if o.json {
		_ = json.NewEncoder(o.stdout).Encode(traceEvent{Kind: "rst", Time: ev.Time.UTC(), Direction: ev.Direction.String(),
			From: ev.Sender.String(), To: ev.Peer.String(), Reason: ev.Reason, Source: ev.Source})
		return
	}
	fmt.Fprintf(o.stdout, "%-24s  %-8s  %s -> %s  %s\n", timestamp(ev.Time), rstDirection(ev.Direction.String()), ev.Sender, ev.Peer, ev.Reason)
}

// traceReport is trace-rsts' JSON: the counts, and the backends watched for
// each Service address.
type traceReport struct {
	Kind string `json:"kind,omitempty"` // "totals" in --watch's JSON Lines
	rst.TraceResult
	Services []vipBackends `json:"services,omitempty"`
}

// result prints the counts.
func (o *traceOutput) result(r rst.TraceResult) {
	r.Started = r.Started.UTC()
	switch {
	case o.json && o.watch:
		_ = json.NewEncoder(o.stdout).Encode(traceReport{Kind: "totals", TraceResult: r, Services: o.resolved})
	case o.json:
		printJSON(o.stdout, traceReport{TraceResult: r, Services: o.resolved})
	default:
		if o.watch {
			fmt.Fprintln(o.stdout) // the counts apart from the events
		}
		writeTraceTable(o.stdout, r, o.ips)
	}
}

// writeTraceTable prints the counts per address, in the order given.
func writeTraceTable(w io.Writer, r rst.TraceResult, ips []netip.Addr) {
	fmt.Fprintf(w, "rst probe mode %s, watched %s from %s\n", r.Mode, seconds(r.DurationSeconds), timestamp(r.Started))
	t := newTable("IP", "RSTS", "SENT_BY", "SENT_TO")
	seen := map[string]bool{}
	for _, ip := range ips {
		k := ip.Unmap().String()
		if seen[k] {
			continue
		}
		seen[k] = true
		t.add(k, fmt.Sprint(r.Counts[k]), fmt.Sprint(r.SentBy[k]), fmt.Sprint(r.SentTo[k]))
	}
	t.write(w)
	if e := r.Events; e != nil {
		fmt.Fprintf(w, "events: %d shown, %d not sampled (the probe emits at most %d per second per CPU); the counts are exact\n",
			e.Delivered, e.NotSampled, rst.DefaultEventsPerSecond)
	}
}
