package cli

import (
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/netdrift/netdrift/internal/api"
)

// serviceArg is explain's argument: NAMESPACE/NAME, or NAME with
// -n NAMESPACE (as kubectl names an object).
func serviceArg(arg, namespace string) (ns, name string, err error) {
	ns, name, found := strings.Cut(arg, "/")
	if !found {
		ns, name = namespace, arg
	}
	switch {
	case found && namespace != "" && namespace != ns:
		return "", "", usagef("%s is in namespace %s, not -n %s: give one namespace", arg, ns, namespace)
	case ns == "" || name == "" || strings.Contains(name, "/"):
		return "", "", usagef("want NAMESPACE/NAME (or NAME with -n NAMESPACE), not %q", arg)
	}
	return ns, name, nil
}

// runExplain is `netdrift explain NAMESPACE/SERVICE`: the service's desired
// and observed verdicts per frontend and its findings (/v1/services/...).
func runExplain(q *queryFlags, ns, name string, stdout, stderr io.Writer) int {
	var v api.ServiceView
	if !q.get("/v1/services/"+url.PathEscape(ns)+"/"+url.PathEscape(name), &v, stderr) {
		return ExitError
	}
	code := ExitOK
	if !v.Exists && len(v.Frontends) == 0 {
		code = ExitError
	}
	// Blind, "not known" is no answer: exit 3, not 2.
	code = sayNoView(q, v.View, stdout, stderr, code)
	if q.document() {
		q.print(stdout, v)
	} else {
		printExplain(stdout, v, q.wide())
	}
	return code
}

// printExplain is explain's tables; wide cuts nothing and adds when each
// finding was first seen and when each change was delivered and programmed
// (RFC 3339).
func printExplain(w io.Writer, v api.ServiceView, wide bool) {
	if !v.Exists && len(v.Frontends) == 0 {
		if blind(v.View) {
			fmt.Fprintf(w, "service %s: not in the agent's watch cache nor in the datapath it last read, neither of which is current\n", v.Service)
			return
		}
		fmt.Fprintf(w, "service %s: not known to the agent and nothing programmed for it\n", v.Service)
		return
	}
	fmt.Fprintf(w, "service %s  exists %s\n\n", v.Service, yesNo(v.Exists))
	t := newTable("FRONTEND", "KIND", "PORT", "DESIRED", "OBSERVED", "MATCH").limit(24, 13, 10, 22, 22, 5).wide(wide)
	for _, f := range v.Frontends {
		t.add(f.Frontend, f.FrontendKind, f.Port, verdictText(f.Desired), verdictText(f.Observed), yesNo(f.Match))
	}
	t.write(w)
	if len(v.Endpoints) > 0 {
		fmt.Fprintln(w)
		e := newTable("ENDPOINT", "PORT", "NODE", "READY", "SERVING", "TERMINATING", "BACKEND", "WHY").limit(22, 10, 12, 5, 7, 11, 7, 30).wide(wide)
		for _, ep := range v.Endpoints {
			e.add(ep.Address, ep.Port, dash(ep.Node), yesNo(ep.Ready), yesNo(ep.Serving), yesNo(ep.Terminating), yesNo(ep.Included), ep.Reason)
		}
		e.write(w)
	}
	if len(v.Findings)+len(v.PendingMismatches) > 0 {
		fmt.Fprintln(w)
		writeFindings(w, "STALE", v.Findings, wide)
		writeFindings(w, "PENDING", v.PendingMismatches, wide)
	}
	for _, p := range v.Pending {
		at := ""
		if wide {
			at = " (" + timestamp(p.T1) + ")"
		}
		fmt.Fprintf(w, "pending %s change, delivered %s ago%s, not yet programmed\n", p.Change, seconds(p.AgeSeconds), at)
	}
	for _, l := range v.Lag {
		at := ""
		if wide {
			at = fmt.Sprintf(" (delivered %s, programmed %s)", timestamp(l.T1), timestamp(l.T2))
		}
		fmt.Fprintf(w, "lag: %s change programmed %s after delivery%s\n", l.Change, seconds(l.NodeLagSeconds), at)
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
