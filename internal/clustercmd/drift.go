package clustercmd

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/netdrift/netdrift/internal/report"
)

// staleBackend is the finding kind of a rule that still DNATs to a backend
// the API no longer lists (model.StaleBackend).
const staleBackend = "stale_backend"

// DriftQuery narrows `cluster drift`.
type DriftQuery struct {
	// Backend: an IP or IP:port; only stale_backend findings to it count
	// (the nodes that still DNAT to it).
	Backend string
	// Service: namespace/name; only its findings count.
	Service string
}

// ClusterDrift is `cluster drift`.
type ClusterDrift struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Backend    string        `json:"backend,omitempty"`
	Service    string        `json:"service,omitempty"`
	Summary    DriftSummary  `json:"summary"`
	Nodes      []NodeDrift   `json:"nodes"`
	Unknown    []NodeUnknown `json:"unknown,omitempty"`
}

// DriftSummary counts the asked-about nodes.
type DriftSummary struct {
	Nodes    int `json:"nodes"`
	Drifting int `json:"drifting"`
	Clean    int `json:"clean"`
	Unknown  int `json:"unknown"`
}

// NodeDrift is a node with matching findings.
type NodeDrift struct {
	Node     string           `json:"node"`
	Matching int              `json:"matching"`
	Findings []report.Finding `json:"findings"`
	// Partial: the report lists only its first findings; more may match.
	Partial bool `json:"partial,omitempty"`
}

// NodeUnknown is a node whose drift is not known, and why.
type NodeUnknown struct {
	Node   string `json:"node"`
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// matcher selects findings.
type matcher struct {
	addr    netip.Addr
	port    uint16 // 0: any
	byAddr  bool
	service string
}

func newMatcher(q DriftQuery) (matcher, error) {
	m := matcher{service: q.Service}
	if q.Service != "" && strings.Count(q.Service, "/") != 1 {
		return m, fmt.Errorf("--service %q: want NAMESPACE/NAME", q.Service)
	}
	if q.Backend == "" {
		return m, nil
	}
	m.byAddr = true
	if ap, err := netip.ParseAddrPort(q.Backend); err == nil {
		m.addr, m.port = ap.Addr().Unmap(), ap.Port()
		return m, nil
	}
	a, err := netip.ParseAddr(q.Backend)
	if err != nil {
		return m, fmt.Errorf("--backend %q: want an IP address or IP:port (a pod IP, as kubectl get pod -o wide shows)", q.Backend)
	}
	m.addr = a.Unmap()
	return m, nil
}

func (m matcher) match(f *report.Finding) bool {
	if m.service != "" && f.Service != m.service {
		return false
	}
	if !m.byAddr {
		return true
	}
	if f.Kind != staleBackend {
		return false
	}
	ap, err := netip.ParseAddrPort(f.Backend)
	if err != nil {
		a, aerr := netip.ParseAddr(f.Backend)
		return aerr == nil && m.port == 0 && a.Unmap() == m.addr
	}
	return ap.Addr().Unmap() == m.addr && (m.port == 0 || ap.Port() == m.port)
}

// mayHideMatch: the report lists only some findings, and the unlisted ones
// could match.
func (m matcher) mayHideMatch(r *report.Report) bool {
	if r.FindingsTotal <= len(r.Findings) {
		return false
	}
	return !m.byAddr || r.FindingsByKind == nil || r.FindingsByKind[staleBackend] > 0
}

// Drift aggregates in into ClusterDrift. Stale, blind and missing agents
// are Unknown: their reports say nothing of the datapath now.
func Drift(in Input, q DriftQuery) (ClusterDrift, error) {
	m, err := newMatcher(q)
	if err != nil {
		return ClusterDrift{}, err
	}
	views, _ := join(in, "")
	out := ClusterDrift{APIVersion: APIVersion, Kind: "ClusterDrift", Backend: q.Backend, Service: q.Service,
		Nodes: []NodeDrift{}}
	out.Summary.Nodes = len(views)
	for _, v := range views {
		if reason := unknownReason(v); reason != "" {
			out.Unknown = append(out.Unknown, NodeUnknown{Node: v.name, State: v.state, Reason: reason})
			continue
		}
		nd := NodeDrift{Node: v.name, Partial: m.mayHideMatch(v.report)}
		for i := range v.report.Findings {
			if f := &v.report.Findings[i]; m.match(f) {
				nd.Findings = append(nd.Findings, *f)
			}
		}
		nd.Matching = len(nd.Findings)
		switch {
		case nd.Matching > 0:
			out.Nodes = append(out.Nodes, nd)
		case nd.Partial:
			out.Unknown = append(out.Unknown, NodeUnknown{Node: v.name, State: v.state,
				Reason: fmt.Sprintf("the report lists %d of its %d findings; none listed matches", len(v.report.Findings), v.report.FindingsTotal)})
		default:
			out.Summary.Clean++
		}
	}
	out.Summary.Drifting, out.Summary.Unknown = len(out.Nodes), len(out.Unknown)
	return out, nil
}

func unknownReason(v nodeView) string {
	switch v.state {
	case StateMissing:
		return "no NodeReport: no agent publishes for this node"
	case StateStale:
		return fmt.Sprintf("the report's heartbeat is %s old", v.age.Round(1e9))
	case StateBlind:
		if v.report.View.Reason != "" {
			return "the agent's view is not current: " + v.report.View.Reason
		}
		return "the agent's view is not current"
	}
	return ""
}
