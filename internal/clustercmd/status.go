package clustercmd

import (
	"github.com/netdrift/netdrift/internal/report"
)

// APIVersion of the commands' JSON and YAML answers.
const APIVersion = "netdrift.io/v1"

// ClusterStatus is `cluster status`: every asked-about node's agent.
type ClusterStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// MajorityVersion is the agentVersion most reports carry.
	MajorityVersion string        `json:"majorityVersion"`
	PluginVersion   string        `json:"pluginVersion,omitempty"`
	Summary         StatusSummary `json:"summary"`
	Nodes           []NodeStatus  `json:"nodes"`
	// ReportsWithoutNode are reports of nodes not asked about (deleted
	// nodes, or outside the label selector).
	ReportsWithoutNode []string `json:"reportsWithoutNode,omitempty"`
}

// StatusSummary counts nodes by agent state.
type StatusSummary struct {
	Nodes    int `json:"nodes"`
	OK       int `json:"ok"`
	Missing  int `json:"missing"`
	Stale    int `json:"stale"`
	Blind    int `json:"blind"`
	Outdated int `json:"outdated"`
	// NotPluginVersion counts reporting agents whose version is not the plugin's.
	NotPluginVersion int `json:"notPluginVersion"`
	WithFindings     int `json:"withFindings"`
}

// NodeStatus is one node's line.
type NodeStatus struct {
	Node             string   `json:"node"`
	State            string   `json:"state"`
	AgentVersion     string   `json:"agentVersion,omitempty"`
	Datapath         string   `json:"datapath,omitempty"`
	HeartbeatAge     float64  `json:"heartbeatAgeSeconds,omitempty"`
	ViewReason       string   `json:"viewReason,omitempty"`
	Findings         int      `json:"findings"`
	PendingChanges   int      `json:"pendingChanges"`
	Degraded         []string `json:"degraded,omitempty"`
	NotPluginVersion bool     `json:"notPluginVersion,omitempty"`
}

// Status aggregates in into ClusterStatus.
func Status(in Input) ClusterStatus {
	majority := majorityVersion(in.Reports)
	views, unmatched := join(in, majority)
	out := ClusterStatus{APIVersion: APIVersion, Kind: "ClusterStatus", MajorityVersion: majority,
		PluginVersion: in.PluginVersion, Nodes: make([]NodeStatus, 0, len(views)), ReportsWithoutNode: unmatched}
	compare := in.PluginVersion != "" && in.PluginVersion != "dev"
	for _, v := range views {
		ns := NodeStatus{Node: v.name, State: v.state}
		if r := v.report; r != nil {
			fillStatus(&ns, r, v)
			ns.NotPluginVersion = compare && r.AgentVersion != in.PluginVersion
		}
		out.Summary.count(ns)
		out.Nodes = append(out.Nodes, ns)
	}
	return out
}

func fillStatus(ns *NodeStatus, r *report.Report, v nodeView) {
	ns.AgentVersion, ns.Datapath = r.AgentVersion, r.Datapath
	ns.HeartbeatAge = v.age.Seconds()
	ns.Findings, ns.PendingChanges, ns.Degraded = r.FindingsTotal, r.PendingChanges, r.Degraded
	if !r.View.Current {
		ns.ViewReason = r.View.Reason
		if ns.ViewReason == "" {
			ns.ViewReason = r.View.Code
		}
	}
}

func (s *StatusSummary) count(ns NodeStatus) {
	s.Nodes++
	switch ns.State {
	case StateOK:
		s.OK++
	case StateMissing:
		s.Missing++
	case StateStale:
		s.Stale++
	case StateBlind:
		s.Blind++
	case StateOutdated:
		s.Outdated++
	}
	if ns.NotPluginVersion {
		s.NotPluginVersion++
	}
	if ns.Findings > 0 {
		s.WithFindings++
	}
}

// Problems counts nodes whose agent is not ok.
func (s StatusSummary) Problems() int { return s.Nodes - s.OK }
