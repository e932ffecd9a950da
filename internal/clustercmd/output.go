package clustercmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Outputs are the -o values.
var Outputs = []string{"table", "json", "yaml"}

func checkOutput(o string) error {
	for _, v := range Outputs {
		if o == v {
			return nil
		}
	}
	return fmt.Errorf("-o %q: want one of %s", o, strings.Join(Outputs, ", "))
}

// encode writes v as JSON or YAML; it reports false for "table".
func encode(w io.Writer, out string, v any) (bool, error) {
	switch out {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return true, enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(b)
		return true, err
	}
	return false, nil
}

func newTab(w io.Writer, header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	return tw
}

func row(tw *tabwriter.Writer, cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}

func printStatus(w io.Writer, s ClusterStatus) error {
	tw := newTab(w, "NODE", "AGENT", "VERSION", "DATAPATH", "HEARTBEAT", "FINDINGS", "PENDING", "NOTE")
	for _, n := range s.Nodes {
		hb, note := "-", n.ViewReason
		if n.State != StateMissing {
			hb = secs(n.HeartbeatAge) + " ago"
		}
		if n.NotPluginVersion {
			note = strings.TrimPrefix(note+"; not the plugin's version "+s.PluginVersion, "; ")
		}
		if len(n.Degraded) > 0 {
			note = strings.TrimPrefix(note+"; degraded: "+strings.Join(n.Degraded, ","), "; ")
		}
		row(tw, n.Node, n.State, dash(n.AgentVersion), dash(n.Datapath), hb,
			strconv.Itoa(n.Findings), strconv.Itoa(n.PendingChanges), dash(note))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	m := s.Summary
	fmt.Fprintf(w, "\n%d nodes: %d ok, %d missing, %d stale, %d blind, %d out of date (majority version %s); %d with findings\n",
		m.Nodes, m.OK, m.Missing, m.Stale, m.Blind, m.Outdated, dash(s.MajorityVersion), m.WithFindings)
	if len(s.ReportsWithoutNode) > 0 {
		fmt.Fprintf(w, "reports of nodes not listed: %s\n", strings.Join(s.ReportsWithoutNode, ", "))
	}
	return nil
}

func printDrift(w io.Writer, d ClusterDrift) error {
	what := "findings"
	if d.Backend != "" {
		what = "rules that still DNAT to " + d.Backend
	}
	if d.Service != "" {
		what += " of " + d.Service
	}
	if len(d.Nodes) > 0 {
		tw := newTab(w, "NODE", "KIND", "SERVICE", "FRONTEND", "BACKEND", "SINCE")
		for _, n := range d.Nodes {
			for _, f := range n.Findings {
				row(tw, n.Node, f.Kind, dash(f.Service), dash(f.Frontend), dash(f.Backend), f.Since.UTC().Format(time.RFC3339))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	s := d.Summary
	fmt.Fprintf(w, "%d of %d nodes with %s; %d clean; %d unknown\n", s.Drifting, s.Nodes, what, s.Clean, s.Unknown)
	for _, u := range d.Unknown {
		fmt.Fprintf(w, "  %s (%s): %s\n", u.Node, u.State, u.Reason)
	}
	return nil
}

func printLag(w io.Writer, l ClusterLag) error {
	tw := newTab(w, "NODE", "AGENT", "SAMPLES", "P50", "P90", "P99", "MAX")
	for _, n := range l.Nodes {
		row(tw, n.Node, n.State, strconv.Itoa(n.Samples), secs(n.P50), secs(n.P90), secs(n.P99), secs(n.Max))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(l.NoSamples) > 0 {
		fmt.Fprintf(w, "\nno lag samples: %s\n", strings.Join(l.NoSamples, ", "))
	}
	return nil
}
