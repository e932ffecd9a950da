package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/netdrift/netdrift/internal/api"
)

// runStatus is `netdrift status`: readiness, sources and watch health
// (/v1/status).
func runStatus(q *queryFlags, stdout, stderr io.Writer) int {
	var s api.Status
	if !fetch(q, "/v1/status", stderr, &s) {
		return ExitError
	}
	if q.document() {
		q.print(stdout, s)
	} else {
		printStatus(stdout, s, q.wide())
	}
	return ExitOK
}

// printStatus is status's table; wide cuts nothing and adds the times of
// the last audit, Lease renewal, delivery and each source's last success
// (RFC 3339).
func printStatus(w io.Writer, s api.Status, wide bool) {
	t := newTable("FIELD", "VALUE").limit(0, 79).wide(wide) // 19 ("recommended preStop") + 2 + 79 = 100
	t.add("node", s.Node)
	t.add("datapath", s.Datapath+"  ("+s.DatapathReason+")")
	t.add("ready", strings.TrimSpace(yesNo(s.Ready)+" "+s.ReadyReason))
	t.add("view", viewText(s.View))
	if blind(s.View) && s.View.LastError != "" {
		t.add("last error", s.View.LastError)
	}
	t.add("converged", yesNo(s.Converged))
	watch := yesNo(s.Watch.Healthy) + "  " + s.Watch.Reason
	t.add("watch healthy", watch)
	if wide {
		t.add("last lease renewal", timestamp(s.Watch.LastLeaseRenew))
		t.add("last delivery", timestamp(s.Watch.LastDelivery))
		t.add("last audit", timestamp(s.LastAudit))
	}
	if s.Watch.LeaseDelaySeconds != nil {
		t.add("lease delay", seconds(*s.Watch.LeaseDelaySeconds))
	}
	t.add("pending changes", fmt.Sprintf("%d (oldest %s)", s.PendingChanges, seconds(s.OldestPendingChangeSeconds)))
	t.add("stale findings", fmt.Sprint(s.Findings))
	t.add("pending mismatches", fmt.Sprint(s.PendingMismatches))
	if s.RSTProbe != nil {
		t.add("rst probe", strings.TrimSpace(yesNo(s.RSTProbe.Up)+" "+s.RSTProbe.Mode+"  "+s.RSTProbe.Reason))
	}
	if s.RecommendedPreStopSeconds != nil {
		t.add("recommended preStop", preStop(*s.RecommendedPreStopSeconds))
	}
	for _, src := range s.Sources {
		v := upDown(src.Up) + "  " + seconds(src.DurationSeconds)
		if wide {
			v += "  last success " + timestamp(src.LastSuccess)
		}
		if src.Error != "" {
			v += "  " + src.Error
		}
		t.add("source "+src.Name, v)
	}
	for _, f := range s.Fallbacks {
		t.add("fallback", f.Reader+"  "+fallbackText(f))
	}
	for _, x := range s.ReaderWarnings {
		t.add("reader warning", x)
	}
	for _, n := range s.Notes {
		t.add("note", n)
	}
	t.write(w)
}

// runDrift is `netdrift drift`: the stale findings and pending mismatches
// (/v1/drift).
func runDrift(q *queryFlags, stdout, stderr io.Writer) int {
	var d api.Drift
	if !fetch(q, "/v1/drift", stderr, &d) {
		return ExitError
	}
	code := ExitOK
	if len(d.Findings) > 0 {
		code = ExitFindings
	}
	code = sayNoView(q, d.View, stdout, stderr, code)
	if q.document() {
		q.print(stdout, d)
	} else {
		printDrift(stdout, d, q.wide())
	}
	return code
}

// printDrift is drift's tables (wide: writeFindings').
func printDrift(w io.Writer, d api.Drift, wide bool) {
	fmt.Fprintf(w, "node %s  datapath %s  findings %d  pending %d\n", d.Node, d.Datapath, len(d.Findings), len(d.Pending))
	writeFindings(w, "STALE", d.Findings, wide)
	writeFindings(w, "PENDING", d.Pending, wide)
	for _, x := range d.Warnings {
		fmt.Fprintf(w, "warning: %s\n", x)
	}
}
