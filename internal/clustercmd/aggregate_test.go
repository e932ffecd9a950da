package clustercmd

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/internal/report"
)

var now = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func nr(node, version string, hbAgo time.Duration, current bool, findings ...report.Finding) report.NodeReport {
	r := report.NodeReport{ObjectMeta: metav1.ObjectMeta{Name: node}, Report: report.Report{
		AgentVersion: version, Datapath: "iptables", Heartbeat: metav1.NewTime(now.Add(-hbAgo)), HeartbeatSeconds: 10,
		View: report.View{Current: current}, Findings: findings, FindingsTotal: len(findings),
	}}
	if !current {
		r.Report.View.Code, r.Report.View.Reason = "watch_unhealthy", "the API watch is not current"
	}
	return r
}

func stale(svc, backend string) report.Finding {
	return report.Finding{Kind: staleBackend, Service: svc, Frontend: "10.96.0.10:80/TCP", Backend: backend,
		Since: metav1.NewTime(now.Add(-time.Minute))}
}

func TestStatusClassifiesAgents(t *testing.T) {
	in := Input{Now: now, PluginVersion: "v0.3.0", Nodes: []string{"n1", "n2", "n3", "n4", "n5", "n6"},
		Reports: []report.NodeReport{
			nr("n1", "v0.3.0", 5*time.Second, true),
			nr("n2", "v0.3.0", 31*time.Second, true), // 3 × 10 s heartbeat exceeded
			nr("n3", "v0.3.0", 5*time.Second, false),
			nr("n4", "v0.2.0", 5*time.Second, true),
			nr("n5", "v0.3.0", 29*time.Second, true, stale("default/web", "10.244.1.5:8080")),
			nr("gone", "v0.3.0", time.Hour, true),
		}}
	s := Status(in)
	got := map[string]string{}
	for _, n := range s.Nodes {
		got[n.Node] = n.State
	}
	want := map[string]string{"n1": StateOK, "n2": StateStale, "n3": StateBlind, "n4": StateOutdated, "n5": StateOK, "n6": StateMissing}
	for n, st := range want {
		if got[n] != st {
			t.Errorf("%s: state %q, want %q", n, got[n], st)
		}
	}
	m := s.Summary
	if m.Nodes != 6 || m.OK != 2 || m.Missing != 1 || m.Stale != 1 || m.Blind != 1 || m.Outdated != 1 || m.WithFindings != 1 || m.NotPluginVersion != 1 {
		t.Errorf("summary %+v", m)
	}
	if s.MajorityVersion != "v0.3.0" || strings.Join(s.ReportsWithoutNode, ",") != "gone" || s.Kind != "ClusterStatus" || s.APIVersion != "netdrift.io/v1" {
		t.Errorf("majority %q, without node %v, kind %s/%s", s.MajorityVersion, s.ReportsWithoutNode, s.APIVersion, s.Kind)
	}
}

func TestStatusDevPluginComparesNothing(t *testing.T) {
	s := Status(Input{Now: now, PluginVersion: "dev", Nodes: []string{"n1"}, Reports: []report.NodeReport{nr("n1", "v1", 0, true)}})
	if s.Summary.NotPluginVersion != 0 || s.Nodes[0].NotPluginVersion {
		t.Errorf("a dev plugin compared versions: %+v", s.Nodes[0])
	}
}

func TestDriftByBackend(t *testing.T) {
	in := Input{Now: now, Nodes: []string{"n1", "n2", "n3", "n4", "n5"}, Reports: []report.NodeReport{
		nr("n1", "v", time.Second, true, stale("default/web", "10.244.1.5:8080")),
		nr("n2", "v", time.Second, true, stale("default/web", "10.244.1.50:8080")),
		nr("n3", "v", time.Second, true, report.Finding{Kind: "missing_backend", Service: "default/web", Backend: "10.244.1.5:8080"}),
		nr("n4", "v", time.Second, false, stale("default/web", "10.244.1.5:8080")), // blind: unknown
	}}
	d, err := Drift(in, DriftQuery{Backend: "10.244.1.5"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Nodes) != 1 || d.Nodes[0].Node != "n1" || d.Nodes[0].Matching != 1 {
		t.Fatalf("drifting nodes %+v, want only n1", d.Nodes)
	}
	if d.Summary != (DriftSummary{Nodes: 5, Drifting: 1, Clean: 2, Unknown: 2}) {
		t.Errorf("summary %+v", d.Summary)
	}
	if len(d.Unknown) != 2 || d.Unknown[0].Node != "n4" || d.Unknown[0].State != StateBlind || d.Unknown[1].Node != "n5" || d.Unknown[1].State != StateMissing {
		t.Errorf("unknown %+v", d.Unknown)
	}
	d, _ = Drift(in, DriftQuery{Backend: "10.244.1.5:9090"})
	if len(d.Nodes) != 0 {
		t.Errorf("another port matched: %+v", d.Nodes)
	}
	d, _ = Drift(in, DriftQuery{Service: "default/web"})
	if len(d.Nodes) != 3 {
		t.Errorf("--service: %d drifting nodes, want 3 (n1, n2, n3)", len(d.Nodes))
	}
}

func TestDriftPartialReport(t *testing.T) {
	r := nr("n1", "v", time.Second, true, stale("default/web", "10.244.1.9:80"))
	r.Report.FindingsTotal, r.Report.FindingsByKind = 120, map[string]int{staleBackend: 120}
	d, _ := Drift(Input{Now: now, Nodes: []string{"n1"}, Reports: []report.NodeReport{r}}, DriftQuery{Backend: "10.244.1.5"})
	if len(d.Unknown) != 1 || !strings.Contains(d.Unknown[0].Reason, "lists 1 of its 120 findings") {
		t.Errorf("partial report without a listed match: %+v", d)
	}
	r.Report.FindingsByKind = map[string]int{"missing_backend": 120}
	d, _ = Drift(Input{Now: now, Nodes: []string{"n1"}, Reports: []report.NodeReport{r}}, DriftQuery{Backend: "10.244.1.5"})
	if d.Summary.Clean != 1 {
		t.Errorf("no stale_backend among the unlisted findings: want clean, got %+v", d.Summary)
	}
}

func TestDriftRefusesBadQuery(t *testing.T) {
	for _, q := range []DriftQuery{{Backend: "web-7f9c"}, {Service: "web"}} {
		if _, err := Drift(Input{}, q); err == nil {
			t.Errorf("%+v: no error", q)
		}
	}
}

func TestLagWorstFirst(t *testing.T) {
	mk := func(node string, p50, p90, p99 float64) report.NodeReport {
		r := nr(node, "v", time.Second, true)
		r.Report.Lag = report.Lag{Samples: 10, ByKind: map[string]report.Percentiles{"all": {Count: 10, P50: p50, P90: p90, P99: p99, Max: p99}}}
		return r
	}
	in := Input{Now: now, Nodes: []string{"a", "b", "c", "d", "e"}, Reports: []report.NodeReport{
		mk("a", 0.1, 0.2, 0.3), mk("b", 0.1, 0.5, 2.0), mk("c", 0.2, 0.6, 0.3), nr("d", "v", time.Second, true)}}
	l := Lag(in)
	var order []string
	for _, n := range l.Nodes {
		order = append(order, n.Node)
	}
	if strings.Join(order, ",") != "b,c,a" || strings.Join(l.NoSamples, ",") != "d,e" {
		t.Errorf("order %v, no samples %v", order, l.NoSamples)
	}
}

func TestMajorityVersionTieIsStable(t *testing.T) {
	a := []report.NodeReport{nr("1", "v1", 0, true), nr("2", "v2", 0, true)}
	b := []report.NodeReport{a[1], a[0]}
	if majorityVersion(a) != "v2" || majorityVersion(b) != "v2" {
		t.Errorf("tie: %q, %q", majorityVersion(a), majorityVersion(b))
	}
}

// synthetic builds n reports (every 50th drifts to 10.244.0.5, every
// 100th is blind, 20 findings each) and the node list.
func synthetic(n int) Input {
	in := Input{Now: now, PluginVersion: "v0.3.0"}
	for i := range n {
		node := fmt.Sprintf("node-%05d", i)
		in.Nodes = append(in.Nodes, node)
		var fs []report.Finding
		for j := range 20 {
			fs = append(fs, stale(fmt.Sprintf("ns%d/svc%d", j, j), fmt.Sprintf("10.245.%d.%d:8080", j, i%250)))
		}
		if i%50 == 0 {
			fs[0].Backend = "10.244.0.5:8080"
		}
		r := nr(node, "v0.3.0", time.Duration(i%20)*time.Second, i%100 != 0, fs...)
		r.Report.Lag = report.Lag{Samples: 100, ByKind: map[string]report.Percentiles{"all": {Count: 100, P50: float64(i%7) / 10, P90: float64(i%11) / 10, P99: float64(i%13) / 10, Max: 2}}}
		in.Reports = append(in.Reports, r)
	}
	return in
}

func TestSynthetic(t *testing.T) {
	d, err := Drift(synthetic(5000), DriftQuery{Backend: "10.244.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	// every 50th node drifts; every 100th (also a 50th) is blind: 50 drifting, 50 unknown.
	if d.Summary.Drifting != 50 || d.Summary.Unknown != 50 || d.Summary.Clean != 4900 {
		t.Errorf("summary %+v", d.Summary)
	}
}

// BenchmarkAggregate5000 is the cost of one cluster answer of each kind
// over 5,000 reports (the lists already decoded).
func BenchmarkAggregate5000(b *testing.B) {
	in := synthetic(5000)
	b.ReportAllocs()
	for b.Loop() {
		_ = Status(in)
		if _, err := Drift(in, DriftQuery{Backend: "10.244.0.5"}); err != nil {
			b.Fatal(err)
		}
		_ = Lag(in)
	}
}

// BenchmarkDecode5000 is the client's decoding of a 5,000-report LIST.
func BenchmarkDecode5000(b *testing.B) {
	in := synthetic(5000)
	raw, err := json.Marshal(report.NodeReportList{Items: in.Reports})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var l report.NodeReportList
		if err := json.Unmarshal(raw, &l); err != nil {
			b.Fatal(err)
		}
	}
}
