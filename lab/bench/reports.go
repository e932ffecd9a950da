package bench

import (
	"encoding/json"
	"fmt"
	"time"
)

// The NodeReport benchmark (`make bench-reports`, BENCHMARKS.md "Node reports"): simulated
// agents' reports written to the lab's API server at the rates the write policy allows
// during a rollout, and one LIST of them all.

// WriteLoad is the NodeReport writes per second of a cluster of nodes during a rollout,
// from the write policy: a node whose change key does not change writes once per heartbeat;
// a node whose key changes faster than once per min-interval writes once per min-interval
// (each write is also its heartbeat). changing is how many nodes' keys change.
func WriteLoad(nodes, changing int, heartbeat, minInterval time.Duration) float64 {
	return float64(nodes-changing)/heartbeat.Seconds() + float64(changing)/minInterval.Seconds()
}

// SimFindings is how many stale findings simulated node i lists at revision rev: one node
// in twenty has 1-20 (the report's default bound), more as the rollout goes on; with
// allChange every node has 1-20 and they change with every revision.
func SimFindings(i, rev int, allChange bool) int {
	if allChange {
		return 1 + (i+rev)%20
	}
	if i%20 != 0 {
		return 0
	}
	return 1 + (i/20+rev)%20
}

// SimReport is the Server-Side Apply body of simulated node i's report with n findings
// at revision rev (heartbeat at), shaped as the agent writes it (internal/report).
func SimReport(i, rev, n int, at time.Time) []byte {
	findings := make([]map[string]any, 0, n)
	for k := range n {
		findings = append(findings, map[string]any{"kind": "stale_backend", "service": fmt.Sprintf("shop/checkout-%03d", k%50),
			"frontend": fmt.Sprintf("10.96.%d.%d:443/TCP", k/250, k%250), "backend": fmt.Sprintf("10.244.%d.%d:8443", (rev+k)%250, k%250),
			"since": at.Add(-time.Duration(k+1) * time.Second).UTC().Format(time.RFC3339)})
	}
	report := map[string]any{
		"agentVersion": "v0.1.0-bench", "datapath": "iptables", "heartbeat": at.UTC().Format(time.RFC3339), "heartbeatSeconds": 120,
		"view":          map[string]any{"current": true},
		"watch":         map[string]any{"synced": true, "healthy": true},
		"findingsTotal": n, "pendingChanges": rev % 7, "oldestPendingChangeSeconds": 0.012 * float64(rev%7),
		"lag": map[string]any{"samples": 500, "byKind": map[string]any{
			"all":    map[string]any{"count": 500, "p50": 0.421, "p90": 0.9, "p99": 1.31, "max": 2.02},
			"add":    map[string]any{"count": 250, "p50": 0.41, "p90": 0.88, "p99": 1.2, "max": 1.9},
			"remove": map[string]any{"count": 250, "p50": 0.43, "p90": 0.91, "p99": 1.35, "max": 2.02}}},
	}
	if n > 0 {
		report["findings"] = findings
		report["findingsByKind"] = map[string]int{"stale_backend": n}
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "netdrift.io/v1alpha1", "kind": "NodeReport",
		"metadata": map[string]any{"name": SimNode(i)}, "report": report})
	if err != nil {
		panic(err) // maps of strings and numbers always encode
	}
	return b
}

// SimNode is simulated node i's name.
func SimNode(i int) string { return fmt.Sprintf("sim-node-%05d", i) }
