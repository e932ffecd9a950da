package scenarios

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// lagPrecisionLimit is the p99 of |netdrift T2 - kube-proxy's logged sync
// completion| that issue 4 asks for. kube-proxy logs "SyncProxyRules
// complete" after its post-commit work (conntrack cleanup for removed
// endpoints, health servers), so T2 (the commit) is usually a few tens of
// milliseconds before the logged completion. Both are asserted: the p99,
// and that every T2 lies within the sync that programmed it (after it
// started, at most lagPrecisionLimit after it completed).
const lagPrecisionLimit = 100 * time.Millisecond

// testLagPrecision: endpoint additions and removals, each programmed by
// kube-proxy; netdrift's T2 for each (service, node) change is compared
// with the completion time kube-proxy logs for the sync that programmed it
// ("SyncProxyRules complete", -v=2).
func testLagPrecision(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	name := "lagp"
	_, base := service(t, l, name, []string{"node-3"}, 0)
	_ = base
	agents := agentsOf(t, l)
	svc := "default/" + name
	waitConverged(t, agents, svc, 60*time.Second)
	start := time.Now()
	sel := map[string]string{"app": name}
	const rounds = 8
	nodes := l.Nodes()
	for i := 0; i < rounds; i++ {
		n := nodes[i%len(nodes)].Name
		p := createPod(t, l, fmt.Sprintf("%s-x%d", name, i), n, sel, 0)
		waitConverged(t, agents, svc, 30*time.Second)
		time.Sleep(1500 * time.Millisecond)
		if err := l.DeletePod(ctx, "default", p.Name, labenv.Grace(0)); err != nil {
			t.Fatal(err)
		}
		if err := l.WaitPodGone(ctx, "default", p.Name, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		waitConverged(t, agents, svc, 30*time.Second)
		time.Sleep(1500 * time.Millisecond)
	}
	var diffs []time.Duration
	outside := 0
	for _, a := range agents {
		var lag Lag
		if err := a.Get(ctx, "/v1/lag", &lag); err != nil {
			t.Fatal(err)
		}
		syncs := kubeProxySyncs(t, l, a.Node, start)
		n := 0
		for _, s := range lag.Samples {
			if s.Service != svc || !s.T1.After(start) {
				continue
			}
			sy, ok := MatchSync(syncs, s.T2, 50*time.Millisecond)
			if !ok {
				t.Errorf("%s: no kube-proxy sync for the %s change at T2 %s", a.Node, s.Change, s.T2.Format(time.StampMicro))
				continue
			}
			d := s.T2.Sub(sy.Complete)
			if s.T2.Before(sy.Start.Add(-10*time.Millisecond)) || d > lagPrecisionLimit {
				t.Errorf("%s: %s change: T2 %s outside kube-proxy's sync %s..%s (+%s)", a.Node, s.Change,
					s.T2.Format("15:04:05.000"), sy.Start.Format("15:04:05.000"), sy.Complete.Format("15:04:05.000"), lagPrecisionLimit)
				outside++
			}
			n++
			diffs = append(diffs, abs(d))
			t.Logf("  %s %-6s T1 %s T2 %s kube-proxy sync %s..%s (log line %d): T2-complete %+.1fms",
				a.Node, s.Change, s.T1.Format("15:04:05.000"), s.T2.Format("15:04:05.000"),
				sy.Start.Format("15:04:05.000"), sy.Complete.Format("15:04:05.000"), sy.Line, float64(d.Microseconds())/1000)
		}
		if n < 2*rounds {
			t.Errorf("%s: %d lag samples for %s, want %d (an add and a remove per round)", a.Node, n, svc, 2*rounds)
		}
	}
	p50, p90, p99, mx := Quantile(diffs, .5), Quantile(diffs, .9), Quantile(diffs, .99), Quantile(diffs, 1)
	t.Logf("LAG PRECISION %s: |T2 - kube-proxy sync complete| over %d samples: p50 %s p90 %s p99 %s max %s",
		e.mode, len(diffs), p50, p90, p99, mx)
	if p99 > lagPrecisionLimit {
		t.Errorf("|T2 - kube-proxy sync complete| p99 %s, want <= %s", p99, lagPrecisionLimit)
	}
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// kubeProxySyncs parses node's kube-proxy log for syncs completed after
// since - 1 minute.
func kubeProxySyncs(t *testing.T, l *labenv.Lab, node string, since time.Time) []Sync {
	t.Helper()
	f, err := os.Open(l.LogPath("kube-proxy/" + node))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := ParseSyncs(f, since.Year(), time.Local)
	if err != nil {
		t.Fatalf("kube-proxy log of %s: %v", node, err)
	}
	var out []Sync
	for _, s := range all {
		if s.Complete.After(since.Add(-time.Minute)) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Fatalf("kube-proxy log of %s: no \"SyncProxyRules complete\" line since %s (is it run with -v=2?)", node, since)
	}
	return out
}
