package clustercmd

import (
	"sort"
)

// ClusterLag is `cluster lag`: per node convergence lag, worst first.
type ClusterLag struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Nodes      []NodeLag `json:"nodes"`
	// NoSamples are nodes whose report has no lag sample (or no report).
	NoSamples []string `json:"noSamples,omitempty"`
}

// NodeLag is one node's node-lag percentiles (seconds) over the agent's
// recent samples, all change kinds together.
type NodeLag struct {
	Node    string  `json:"node"`
	State   string  `json:"state"`
	Samples int     `json:"samples"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
}

// Lag aggregates in into ClusterLag, sorted by p99, then p90, then p50,
// descending (worst first), then by name.
func Lag(in Input) ClusterLag {
	views, _ := join(in, "")
	out := ClusterLag{APIVersion: APIVersion, Kind: "ClusterLag", Nodes: []NodeLag{}}
	for _, v := range views {
		if v.report == nil {
			out.NoSamples = append(out.NoSamples, v.name)
			continue
		}
		p, ok := v.report.Lag.ByKind["all"]
		if !ok || p.Count == 0 {
			out.NoSamples = append(out.NoSamples, v.name)
			continue
		}
		out.Nodes = append(out.Nodes, NodeLag{Node: v.name, State: v.state, Samples: p.Count,
			P50: p.P50, P90: p.P90, P99: p.P99, Max: p.Max})
	}
	sort.Slice(out.Nodes, func(i, j int) bool {
		a, b := out.Nodes[i], out.Nodes[j]
		if a.P99 != b.P99 {
			return a.P99 > b.P99
		}
		if a.P90 != b.P90 {
			return a.P90 > b.P90
		}
		if a.P50 != b.P50 {
			return a.P50 > b.P50
		}
		return a.Node < b.Node
	})
	return out
}
