// Package report defines NodeReport, the compact cluster-scoped custom
// resource in which each agent publishes its own node's state (one object per
// node, named after the node), and the pure functions that build, bound and
// read it. The agent writes reports; `kubectl netdrift cluster ...` lists them
// to answer across nodes in one request.
package report

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The custom resource's coordinates (deploy/crds/ holds its definition).
const (
	Group      = "netdrift.io"
	Version    = "v1alpha1"
	APIVersion = Group + "/" + Version
	Kind       = "NodeReport"
	Resource   = "nodereports"
	ListKind   = "NodeReportList"
)

// NodeReport is one node's report; metadata.name is the node's name.
type NodeReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Report            Report `json:"report"`
}

// NodeReportList is a LIST of reports.
type NodeReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []NodeReport `json:"items"`
}

// Report is what an agent says of its node. It is bounded: at most a fixed
// number of findings are listed, the counts cover all of them.
type Report struct {
	// AgentVersion is the writing agent's version (netdrift version).
	AgentVersion string `json:"agentVersion"`
	// Datapath is the mode read: iptables, nftables, ipvs or cilium.
	Datapath string `json:"datapath"`
	// Heartbeat is when the agent wrote this report (its clock); a reader
	// calls a report stale when the heartbeat is older than a few intervals.
	Heartbeat metav1.Time `json:"heartbeat"`
	// HeartbeatSeconds is the agent's heartbeat interval.
	HeartbeatSeconds int `json:"heartbeatSeconds"`
	// View: whether the answers rest on a current view (false = blind).
	View View `json:"view"`
	// Watch: the agent's watch of the API server.
	Watch Watch `json:"watch"`
	// Findings are the first stale findings (sorted by age, oldest first);
	// FindingsTotal counts all of them and FindingsByKind by kind.
	Findings       []Finding      `json:"findings,omitempty"`
	FindingsTotal  int            `json:"findingsTotal"`
	FindingsByKind map[string]int `json:"findingsByKind,omitempty"`
	// PendingChanges: EndpointSlice changes not yet programmed, and the
	// oldest one's age.
	PendingChanges             int     `json:"pendingChanges"`
	OldestPendingChangeSeconds float64 `json:"oldestPendingChangeSeconds"`
	// Lag: convergence lag percentiles over the agent's recent samples.
	Lag Lag `json:"lag"`
	// Degraded lists degraded sources and reader fallbacks in force.
	Degraded []string `json:"degraded,omitempty"`
}

// View mirrors api.View: current or not, and why.
type View struct {
	Current bool         `json:"current"`
	Code    string       `json:"code,omitempty"`
	Reason  string       `json:"reason,omitempty"`
	Since   *metav1.Time `json:"since,omitempty"`
}

// Watch is the watch's health.
type Watch struct {
	Synced  bool   `json:"synced"`
	Healthy bool   `json:"healthy"`
	Reason  string `json:"reason,omitempty"`
}

// Finding is one stale finding, compact.
type Finding struct {
	Kind     string `json:"kind"`
	Service  string `json:"service,omitempty"` // namespace/name
	Frontend string `json:"frontend,omitempty"`
	Backend  string `json:"backend,omitempty"`
	// Subject names what a finding without a frontend is about (a route,
	// a link, a conntrack entry, a missing node).
	Subject string      `json:"subject,omitempty"`
	Since   metav1.Time `json:"since"`
}

// Lag holds node-lag percentiles (seconds) over the recent samples:
// "all" and by change kind (add, remove, ...), as /v1/lag's node_lag.
type Lag struct {
	Samples int                    `json:"samples"`
	ByKind  map[string]Percentiles `json:"byKind,omitempty"`
}

// Percentiles in seconds.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}
