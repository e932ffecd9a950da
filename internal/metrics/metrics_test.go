package metrics_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/agent/agenttest"
	"github.com/netdrift/netdrift/internal/metrics"
)

func fixed() agent.State { return agenttest.State() }

// TestLint runs the Prometheus linter over every collector the agent registers.
func TestLint(t *testing.T) {
	rec := metrics.NewRecorder()
	for _, s := range agenttest.Samples() {
		rec.ObserveLag(s)
	}
	rec.ObserveWatchDelay("lease", 30*time.Millisecond)
	cs := append(rec.Collectors(), metrics.NewCollector(fixed, "v0.1.0-test", 100))
	for i, c := range cs {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatalf("collector %d: %v", i, err)
		}
		for _, p := range problems {
			t.Errorf("collector %d: %s: %s", i, p.Metric, p.Text)
		}
	}
}

// TestRequiredMetrics: every metric name the issue requires is exported,
// with its labels, from a fresh registry.
func TestRequiredMetrics(t *testing.T) {
	rec := metrics.NewRecorder()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(rec.Collectors()...)
	reg.MustRegister(metrics.NewCollector(fixed, "v0.1.0-test", 100))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName())
			}
			got[mf.GetName()] = ls
		}
	}
	want := map[string][]string{
		"netdrift_build_info":                          {"version"},
		"netdrift_node_info":                           {"datapath", "node"},
		"netdrift_source_up":                           {"source"},
		"netdrift_source_scrape_duration_seconds":      {"source"},
		"netdrift_findings":                            {"kind"},
		"netdrift_oldest_finding_age_seconds":          nil,
		"netdrift_pending_changes":                     nil,
		"netdrift_oldest_pending_change_seconds":       nil,
		"netdrift_node_programming_lag_seconds":        {"change"},
		"netdrift_network_programming_latency_seconds": {"change"},
		"netdrift_watch_delay_seconds":                 {"source"},
		"netdrift_watch_healthy":                       nil,
		"netdrift_stale_backends":                      {"namespace", "service"},
	}
	for name, labels := range want {
		ls, ok := got[name]
		if !ok {
			t.Errorf("missing metric %s", name)
			continue
		}
		if !slices.Equal(ls, labels) {
			t.Errorf("%s: labels %v, want %v", name, ls, labels)
		}
	}
}

// TestNetworkProgrammingBuckets: the same buckets as kube-proxy's
// network programming duration, so the two histograms compare directly.
func TestNetworkProgrammingBuckets(t *testing.T) {
	b := metrics.NetworkProgrammingBuckets()
	if len(b) != 80 || b[0] != 0.25 || b[1] != 0.5 || b[2] != 1 || b[60] != 59 || b[61] != 60 || b[72] != 115 ||
		b[73] != 120 || b[79] != 300 {
		t.Fatalf("buckets %v", b)
	}
}

// staleSeries gathers netdrift_stale_backends as "namespace/service" -> value.
func staleSeries(t *testing.T, st agent.State, max int) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(func() agent.State { return st }, "test", max))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "netdrift_stale_backends" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ns, svc string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "namespace":
					ns = l.GetValue()
				case "service":
					svc = l.GetValue()
				}
			}
			out[ns+"/"+svc] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestStaleBackendsCap: more services than --max-service-series gives max
// services their own series (the first seen; by name within one scrape),
// and sums the rest under "_other" (servicecap).
func TestStaleBackendsCap(t *testing.T) {
	st := agenttest.State()
	st.Stale = agenttest.ManyStale(10) // services svc-000..svc-009 with 1,2,3,1,2,3,1,2,3,1 findings: 19
	for _, tc := range []struct {
		max        int
		series     int
		other      float64
		mustExist  []string
		mustBeGone []string
	}{
		{max: 4, series: 5, other: 19 - 7, mustExist: []string{"ns/svc-000", "ns/svc-001", "ns/svc-002", "ns/svc-003"},
			mustBeGone: []string{"ns/svc-004", "ns/svc-008"}},
		{max: 1, series: 2, other: 18, mustExist: []string{"ns/svc-000"}},
		{max: 10, series: 10, other: 0, mustExist: []string{"ns/svc-000", "ns/svc-009"}},
		{max: 100, series: 10, other: 0},
	} {
		t.Run(fmt.Sprint("max=", tc.max), func(t *testing.T) {
			got := staleSeries(t, st, tc.max)
			if len(got) != tc.series {
				t.Errorf("%d series, want %d: %v", len(got), tc.series, got)
			}
			var sum float64
			for _, v := range got {
				sum += v
			}
			if sum != 19 {
				t.Errorf("series sum to %v, want all 19 stale backends", sum)
			}
			if o := got["_other/_other"]; o != tc.other {
				t.Errorf(`service="_other" holds %v, want %v (%v)`, o, tc.other, got)
			}
			for _, k := range tc.mustExist {
				if _, ok := got[k]; !ok {
					t.Errorf("series %s missing: %v", k, got)
				}
			}
			for _, k := range tc.mustBeGone {
				if _, ok := got[k]; ok {
					t.Errorf("series %s should be under _other: %v", k, got)
				}
			}
		})
	}
}

// TestWatchHealthyGauge follows the state's watch health.
func TestWatchHealthyGauge(t *testing.T) {
	st := agenttest.State()
	for _, healthy := range []bool{true, false} {
		st.Watch.Healthy = healthy
		reg := prometheus.NewRegistry()
		s := st
		reg.MustRegister(metrics.NewCollector(func() agent.State { return s }, "test", 100))
		want := 0.0
		if healthy {
			want = 1
		}
		n, err := testutil.GatherAndCount(reg, "netdrift_watch_healthy")
		if err != nil || n != 1 {
			t.Fatalf("netdrift_watch_healthy series %d, %v", n, err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "netdrift_watch_healthy" && mf.GetMetric()[0].GetGauge().GetValue() != want {
				t.Errorf("healthy=%v: gauge %v", healthy, mf.GetMetric()[0].GetGauge().GetValue())
			}
		}
	}
}

// TestPreStop: the recommendation over the fixed state's removals (p99 of
// T2-T0 {0.7 s, 1.35 s} = 1.35 s; 1.35*1.2+1 = 2.62 -> 3), absent without any.
func TestPreStop(t *testing.T) {
	want := `# HELP netdrift_recommended_prestop_seconds Recommended preStop sleep: p99 of this node's endpoint-removal latency (T2-T0) over 30 min, +20% +1 s, rounded up. Absent without removal samples.
# TYPE netdrift_recommended_prestop_seconds gauge
netdrift_recommended_prestop_seconds 3
`
	if err := testutil.CollectAndCompare(metrics.NewPreStop(fixed), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(metrics.NewPreStop(fixed)); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
	none := func() agent.State { s := agenttest.State(); s.Recent = nil; return s }
	if n := testutil.CollectAndCount(metrics.NewPreStop(none)); n != 0 {
		t.Errorf("%d series without removal samples, want none", n)
	}
}

// TestWatchDelayBySource: each delay is counted in its source's series,
// the pre-resolved ones and a source not known in advance alike.
func TestWatchDelayBySource(t *testing.T) {
	rec := metrics.NewRecorder()
	rec.ObserveWatchDelay("endpointslice", 20*time.Millisecond)
	rec.ObserveWatchDelay("endpointslice", -time.Second) // clock skew: counted as 0
	rec.ObserveWatchDelay("lease", time.Second)
	rec.ObserveWatchDelay("other", time.Second)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(rec.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	sums := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "netdrift_watch_delay_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			src := m.GetLabel()[0].GetValue()
			got[src], sums[src] = m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
		}
	}
	want := map[string]uint64{"endpointslice": 2, "lease": 1, "other": 1}
	if !maps.Equal(got, want) {
		t.Errorf("samples per source %v, want %v", got, want)
	}
	if sums["endpointslice"] != 0.02 || sums["lease"] != 1 {
		t.Errorf("sums %v: want endpointslice 0.02 s (the negative delay as 0), lease 1 s", sums)
	}
}
