// Package clustercmd answers across nodes from one LIST of NodeReports (the
// custom resource each agent publishes for its node) and one LIST of Nodes:
// `kubectl netdrift cluster status|drift|lag`. The aggregation is pure
// (Input → ClusterStatus, ClusterDrift, ClusterLag); the commands list,
// aggregate and print.
package clustercmd

import (
	"sort"
	"time"

	"github.com/netdrift/netdrift/internal/report"
)

// DefaultHeartbeat is the heartbeat interval assumed of a report that
// states none.
const DefaultHeartbeat = 30 * time.Second

// StaleAfterBeats: a report is stale when its heartbeat is older than this
// many of its heartbeat intervals.
const StaleAfterBeats = 3

// Input is what every cluster command aggregates.
type Input struct {
	// Nodes are the nodes asked about (after -l), by name.
	Nodes []string
	// Reports are every NodeReport listed.
	Reports []report.NodeReport
	// Now is the reader's clock.
	Now time.Time
	// PluginVersion is this plugin's version ("" or "dev": not compared).
	PluginVersion string
}

// Agent states of a node.
const (
	StateOK       = "ok"
	StateMissing  = "missing"  // no report for the node
	StateStale    = "stale"    // heartbeat older than StaleAfterBeats intervals
	StateBlind    = "blind"    // the agent says its view is not current
	StateOutdated = "outdated" // agentVersion differs from the majority
)

// nodeView is one asked-about node with its report, if any.
type nodeView struct {
	name   string
	report *report.Report
	state  string
	age    time.Duration // heartbeat age
}

// join pairs each node with its report and classifies the agent. Reports
// of nodes not asked about are returned by name (a deleted node's report
// left behind, or a node outside -l).
func join(in Input, majority string) (views []nodeView, unmatched []string) {
	byName := make(map[string]*report.Report, len(in.Reports))
	for i := range in.Reports {
		byName[in.Reports[i].Name] = &in.Reports[i].Report
	}
	asked := make(map[string]bool, len(in.Nodes))
	views = make([]nodeView, 0, len(in.Nodes))
	for _, n := range in.Nodes {
		asked[n] = true
		v := nodeView{name: n, report: byName[n]}
		v.state, v.age = classify(v.report, in.Now, majority)
		views = append(views, v)
	}
	for i := range in.Reports {
		if n := in.Reports[i].Name; !asked[n] {
			unmatched = append(unmatched, n)
		}
	}
	sort.Slice(views, func(i, j int) bool { return views[i].name < views[j].name })
	sort.Strings(unmatched)
	return views, unmatched
}

// classify: missing, then stale, blind, outdated, in that order (a stale
// report's view and version say nothing current).
func classify(r *report.Report, now time.Time, majority string) (string, time.Duration) {
	if r == nil {
		return StateMissing, 0
	}
	age := now.Sub(r.Heartbeat.Time)
	beat := time.Duration(r.HeartbeatSeconds) * time.Second
	if beat <= 0 {
		beat = DefaultHeartbeat
	}
	switch {
	case age > StaleAfterBeats*beat:
		return StateStale, age
	case !r.View.Current:
		return StateBlind, age
	case majority != "" && r.AgentVersion != majority:
		return StateOutdated, age
	}
	return StateOK, age
}

// majorityVersion is the agentVersion most reports carry (ties: the
// greatest string, so the answer does not depend on list order).
func majorityVersion(reports []report.NodeReport) string {
	count := map[string]int{}
	for i := range reports {
		count[reports[i].Report.AgentVersion]++
	}
	best, n := "", 0
	for v, c := range count {
		if c > n || (c == n && v > best) {
			best, n = v, c
		}
	}
	return best
}
