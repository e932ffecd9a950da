package api

import (
	"time"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
)

// ViewOf converts the agent's view.
func ViewOf(v agent.View) *View {
	return &View{Current: v.Current, Code: v.Code, Reason: v.Reason, Since: v.Since, LastError: v.LastError,
		DatapathBehindCommits: v.Behind.Commits, DatapathBehindSince: v.Behind.Since}
}

// FallbacksOf converts fallbacks; never nil.
func FallbacksOf(fs []agent.Fallback) []Fallback {
	out := make([]Fallback, 0, len(fs))
	for _, f := range fs {
		out = append(out, Fallback{Reader: f.Reader, From: f.From, To: f.To, Reason: f.Reason, Since: f.Since})
	}
	return out
}

// FindingOf converts a finding to its JSON shape.
func FindingOf(f model.Finding) Finding {
	out := Finding{Kind: string(f.Kind), Detail: f.Detail, Subject: f.Subject, Evidence: f.Evidence}
	if f.Scope == model.ScopeCluster {
		out.Scope = f.Scope
	}
	if !f.Service.IsZero() {
		out.Service = f.Service.Service()
		out.Port = f.Service.Port
		out.Protocol = string(f.Service.Protocol)
	}
	if f.Frontend != nil {
		out.Frontend = f.Frontend.String()
		out.FrontendKind = string(f.Frontend.Kind)
		if out.Protocol == "" {
			out.Protocol = string(f.Frontend.Protocol)
		}
	}
	if f.Backend.IsValid() {
		out.Backend = f.Backend.String()
	}
	return out
}

// FindingsOf converts findings, keeping their order; never nil.
func FindingsOf(fs []model.Finding) []Finding {
	out := make([]Finding, 0, len(fs))
	for _, f := range fs {
		out = append(out, FindingOf(f))
	}
	return out
}

// TrackedOf converts tracked findings with first-seen time and age at now.
func TrackedOf(ts []drift.Tracked, now time.Time) []Finding {
	out := make([]Finding, 0, len(ts))
	for _, t := range ts {
		f := FindingOf(t.Finding)
		first := t.FirstSeen
		age := now.Sub(first).Seconds()
		f.FirstSeen, f.AgeSeconds = &first, &age
		out = append(out, f)
	}
	return out
}

// LagSampleOf converts a lag sample.
func LagSampleOf(s drift.LagSample) LagSample {
	out := LagSample{Service: s.Service.String(), Change: string(s.Kind), T0: s.T0, T0Source: s.T0Source, T1: s.T1, T2: s.T2,
		T2Source: s.T2Source, NodeLagSeconds: s.NodeLag().Seconds(), Superseded: s.Superseded}
	if l, ok := s.NetworkLatency(); ok {
		v := l.Seconds()
		out.NetworkLatencySeconds = &v
	}
	return out
}

// PendingOf converts pending changes.
func PendingOf(ps []drift.PendingChange, now time.Time) []PendingChange {
	out := make([]PendingChange, 0, len(ps))
	for _, p := range ps {
		out = append(out, PendingChange{Service: p.Service.String(), Change: string(p.Kind), T0: p.T0, T1: p.T1,
			AgeSeconds: now.Sub(p.T1).Seconds()})
	}
	return out
}

// VerdictOf converts a verdict.
func VerdictOf(v model.Verdict) *Verdict {
	out := &Verdict{Action: string(v.Action), Uncertain: v.Uncertain, Evidence: v.Evidence}
	for _, b := range v.Backends {
		out.Backends = append(out.Backends, b.String())
	}
	return out
}

// PercentilesOf computes percentiles (nearest rank) of durations.
func PercentilesOf(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	rank := func(p float64) float64 { return drift.Percentile(ds, p).Seconds() }
	return Percentiles{Count: len(ds), P50: rank(0.5), P90: rank(0.9), P99: rank(0.99), Max: rank(1)}
}

// LagOf builds /v1/lag from samples and pending changes.
func LagOf(node string, samples []drift.LagSample, pending []drift.PendingChange, now time.Time) Lag {
	out := Lag{Node: node, Samples: make([]LagSample, 0, len(samples)), Pending: PendingOf(pending, now),
		NodeLag: map[string]Percentiles{}, NetworkLatency: map[string]Percentiles{}}
	nl, lat := map[string][]time.Duration{}, map[string][]time.Duration{}
	for _, s := range samples {
		out.Samples = append(out.Samples, LagSampleOf(s))
		for _, k := range []string{"all", string(s.Kind)} {
			nl[k] = append(nl[k], s.NodeLag())
			if l, ok := s.NetworkLatency(); ok {
				lat[k] = append(lat[k], l)
			}
		}
	}
	for k, v := range nl {
		out.NodeLag[k] = PercentilesOf(v)
	}
	for k, v := range lat {
		out.NetworkLatency[k] = PercentilesOf(v)
	}
	return out
}
