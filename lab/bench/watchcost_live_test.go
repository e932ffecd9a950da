package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/lab/labenv"
)

// TestBenchWatchCost is `make bench-watchcost`: one lab of WATCHCOST_NODES
// nodes, the API server's CPU and RSS (and etcd's) over churn windows with
// no watcher, N kube-proxies, and N kube-proxies plus N agents; the table
// is printed and written to $WATCHCOST_OUT/watchcost-<nodes>.txt (raw
// figures in .json). It asserts that the windows ran and the figures were
// read, never a cost. Skipped unless NETDRIFT_BENCH_WATCHCOST=1.
//
//	WATCHCOST_NODES     20
//	WATCHCOST_ENDPOINTS 10k (10 per service)
//	WATCHCOST_RATE      5 (changes per second in every window)
//	WATCHCOST_NODE_RATE 0 (Node status heartbeats patched per second beside them)
//	WATCHCOST_SECONDS   60 (each window)
//	WATCHCOST_ORDER     "0 1 2 1" (0 none, 1 kube-proxies, 2 kube-proxies + agents)
//	WATCHCOST_SETTLE    20 (seconds between a change of components and the window)
//	WATCHCOST_PROXY_MODE nftables
//	WATCHCOST_AGENT_ARGS extra agent flags (after --datapath=<mode> --no-rst-probe)
//	WATCHCOST_OUT       output directory (default ../../bin/bench-watchcost)
func TestBenchWatchCost(t *testing.T) {
	if os.Getenv("NETDRIFT_BENCH_WATCHCOST") != "1" {
		t.Skip("set NETDRIFT_BENCH_WATCHCOST=1 (make bench-watchcost)")
	}
	needRoot(t)
	bin := agentBinary(t)
	nodes := intEnv(t, "WATCHCOST_NODES", 20)
	eps, err := ParseScale(fields(t, "WATCHCOST_ENDPOINTS", "10k")[0])
	if err != nil {
		t.Fatal(err)
	}
	rate, err := strconv.ParseFloat(fields(t, "WATCHCOST_RATE", "5")[0], 64)
	if err != nil || rate <= 0 {
		t.Fatalf("WATCHCOST_RATE=%q: want changes per second > 0", os.Getenv("WATCHCOST_RATE"))
	}
	nodeRate, err := strconv.ParseFloat(fields(t, "WATCHCOST_NODE_RATE", "0")[0], 64)
	if err != nil || nodeRate < 0 {
		t.Fatalf("WATCHCOST_NODE_RATE=%q: want heartbeats per second >= 0", os.Getenv("WATCHCOST_NODE_RATE"))
	}
	order, err := ParseOrder(fields(t, "WATCHCOST_ORDER", "0 1 2 1"))
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("WATCHCOST_OUT")
	if out == "" {
		out = filepath.Join(labenv.ModuleDir(), "..", "bin", "bench-watchcost")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	ensureBins(t)
	cfg := CostConfig{Nodes: nodes, Endpoints: eps, Rate: rate, NodeRate: nodeRate, Window: seconds(t, "WATCHCOST_SECONDS", 60),
		Order: order, Settle: seconds(t, "WATCHCOST_SETTLE", 20), ProxyMode: os.Getenv("WATCHCOST_PROXY_MODE"),
		Agent: bin, AgentArgs: strings.Fields(os.Getenv("WATCHCOST_AGENT_ARGS")), Logf: t.Logf}
	res := RunWatchCost(context.Background(), cfg)
	var buf bytes.Buffer
	res.Write(&buf)
	fmt.Fprintf(&buf, "\ncommand: make bench-watchcost WATCHCOST_NODES=%d WATCHCOST_ENDPOINTS=%s WATCHCOST_RATE=%g WATCHCOST_NODE_RATE=%g WATCHCOST_SECONDS=%.0f WATCHCOST_ORDER=%q\n",
		nodes, ScaleName(eps), rate, nodeRate, cfg.Window.Seconds(), strings.Join(orderFields(order), " "))
	if len(cfg.AgentArgs) > 0 { // the agents' flags belong to the command that reproduces the run
		fmt.Fprintf(&buf, "  WATCHCOST_AGENT_ARGS=%q\n", strings.Join(cfg.AgentArgs, " "))
	}
	fmt.Print(buf.String())
	base := filepath.Join(out, fmt.Sprintf("watchcost-%d", nodes))
	if nodeRate > 0 {
		base += fmt.Sprintf("-nodes%g", nodeRate)
	}
	if err := os.WriteFile(base+".txt", buf.Bytes(), 0o644); err != nil {
		t.Error(err)
	}
	if b, err := json.MarshalIndent(res, "", " "); err == nil {
		_ = os.WriteFile(base+".json", b, 0o644)
	}
	if res.Err != nil {
		t.Fatalf("%v (partial results in %s.txt)", res.Err, base)
	}
	checkCostRun(t, res)
}

// checkCostRun asserts that every window ran its churn and that the API
// server's figures were read.
func checkCostRun(t *testing.T, res *CostResult) {
	if len(res.Windows) != len(res.Config.Order) {
		t.Fatalf("%d windows, want %d", len(res.Windows), len(res.Config.Order))
	}
	for i, w := range res.Windows {
		want := int(res.Config.Rate * res.Config.Window.Seconds())
		if w.Changes != want || w.ChangeErrors > 0 {
			t.Errorf("window %d: %d changes (%d failed), want %d", i+1, w.Changes, w.ChangeErrors, want)
		}
		if wantNodes := res.Config.NodeRate > 0; (w.NodePatches > 0) != wantNodes || w.NodePatchErrors > 0 {
			t.Errorf("window %d: %d node heartbeats (%d failed) at %g/s", i+1, w.NodePatches, w.NodePatchErrors, res.Config.NodeRate)
		}
		if w.API <= 0 || w.APIRSS.Samples == 0 {
			t.Errorf("window %d: API server CPU %s from %d RSS samples: not measured", i+1, w.API, w.APIRSS.Samples)
		}
		if len(w.After.Watches) == 0 {
			t.Errorf("window %d: no apiserver_longrunning_requests WATCH series on /metrics", i+1)
		}
	}
	if _, err := Derive(SummarizeCost(res.Windows)); err != nil {
		t.Error(err)
	}
}

func intEnv(t *testing.T, env string, def int) int {
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive whole number", env, v)
	}
	return n
}
