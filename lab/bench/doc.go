// Package bench is the live cost benchmark of issue 16 (`make bench-live`):
// one lab node running the real kube-proxy and the netdrift agent (the
// binary, driven as a process), Services and EndpointSlices written straight
// to the API server at 1k-100k endpoints, churn at fixed rates, and the
// CPU (with reaped children), peak RSS, idle CPU, start-up and lag
// precision of both processes measured from /proc over the same windows.
// Lag precision has two references: kube-proxy's logged sync completions,
// and the commits the harness's own nf_tables netlink listener reads in the
// node's namespace (monitor.go, monitor_nl.go).
//
// The API server's, etcd's and the controller manager's own costs are not
// measured there; `make bench-watchcost` (watchcost*.go) measures the API
// server's and etcd's cost of N agents' watches beside N kube-proxies' in
// one lab of N nodes. The non-test files are pure or thin (/proc readers,
// object builders, the reports) so they can be unit tested without root;
// the lab runs are TestBenchLive (env-driven, NETDRIFT_BENCH_LIVE=1),
// TestBenchLiveQuick (1k endpoints, 30 s, correctness only) and
// TestBenchWatchCost (NETDRIFT_BENCH_WATCHCOST=1).
package bench
