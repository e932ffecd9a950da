package report

import (
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/internal/api"
)

// Inputs are the agent's answers a report is built from: what /v1/status
// and /v1/drift serve (the stale findings of Drift.Findings), so that a
// report never disagrees with the agent's own API.
type Inputs struct {
	Status   api.Status
	Findings []api.Finding
}

// Options are what a report adds to the inputs.
type Options struct {
	AgentVersion string
	Heartbeat    time.Duration
	MaxFindings  int
	Now          time.Time
	NodeLag      map[string]api.Percentiles // /v1/lag's node_lag (by change kind and "all")
	LagSamples   int                        // /v1/lag's sample count
}

// Build is the report of the inputs: the first opts.MaxFindings findings,
// oldest first, with the total and the counts by kind of all of them.
func Build(in Inputs, opts Options) Report {
	st := in.Status
	r := Report{
		AgentVersion:               opts.AgentVersion,
		Datapath:                   st.Datapath,
		Heartbeat:                  metav1.NewTime(opts.Now.UTC().Truncate(time.Second)),
		HeartbeatSeconds:           int(opts.Heartbeat / time.Second),
		Watch:                      Watch{Synced: st.Watch.Synced, Healthy: st.Watch.Healthy, Reason: st.Watch.Reason},
		FindingsTotal:              len(in.Findings),
		PendingChanges:             st.PendingChanges,
		OldestPendingChangeSeconds: round3(st.OldestPendingChangeSeconds),
		Lag:                        lagOf(opts.NodeLag, opts.LagSamples),
		Degraded:                   Degraded(st),
	}
	if st.View != nil {
		r.View = View{Current: st.View.Current, Code: st.View.Code, Reason: st.View.Reason}
		if !st.View.Since.IsZero() {
			t := metav1.NewTime(st.View.Since.UTC())
			r.View.Since = &t
		}
	}
	sorted := OldestFirst(in.Findings)
	for i, f := range sorted {
		if r.FindingsByKind == nil {
			r.FindingsByKind = map[string]int{}
		}
		r.FindingsByKind[f.Kind]++
		if i < opts.MaxFindings {
			r.Findings = append(r.Findings, findingOf(f))
		}
	}
	return r
}

func findingOf(f api.Finding) Finding {
	out := Finding{Kind: f.Kind, Service: f.Service, Frontend: f.Frontend, Backend: f.Backend, Subject: f.Subject}
	if f.FirstSeen != nil {
		out.Since = metav1.NewTime(f.FirstSeen.UTC())
	}
	return out
}

// OldestFirst is the findings sorted by first-seen time, oldest first (those
// without one last), ties by kind, service, frontend and backend; a copy.
func OldestFirst(fs []api.Finding) []api.Finding {
	out := append([]api.Finding(nil), fs...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.FirstSeen == nil || b.FirstSeen == nil:
			if (a.FirstSeen == nil) != (b.FirstSeen == nil) {
				return b.FirstSeen == nil
			}
		case !a.FirstSeen.Equal(*b.FirstSeen):
			return a.FirstSeen.Before(*b.FirstSeen)
		}
		return Identity(a) < Identity(b)
	})
	return out
}

// Identity is what names a finding in the change key: kind, service,
// frontend, backend, and for findings without a frontend their subject
// (its detail and evidence may vary between reads).
func Identity(f api.Finding) string {
	return f.Kind + "|" + f.Service + "|" + f.Frontend + "|" + f.Backend + "|" + f.Subject
}

// Degraded is the degraded sources ("source NAME: error") and the reader
// fallbacks in force ("READER: FROM -> TO") of a status, sorted.
func Degraded(st api.Status) []string {
	var out []string
	for _, s := range st.Sources {
		if !s.Up {
			out = append(out, fmt.Sprintf("source %s down", s.Name))
		}
	}
	for _, f := range st.Fallbacks {
		out = append(out, fmt.Sprintf("%s: %s -> %s", f.Reader, f.From, f.To))
	}
	sort.Strings(out)
	return out
}

func lagOf(byKind map[string]api.Percentiles, samples int) Lag {
	l := Lag{Samples: samples}
	for k, p := range byKind {
		if l.ByKind == nil {
			l.ByKind = map[string]Percentiles{}
		}
		l.ByKind[k] = Percentiles{Count: p.Count, P50: round3(p.P50), P90: round3(p.P90), P99: round3(p.P99), Max: round3(p.Max)}
	}
	return l
}

// round3 keeps milliseconds: the report is compact, and a reader compares
// seconds.
func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }
