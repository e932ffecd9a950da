package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/api"
)

var t0 = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

func finding(kind, svc, backend string, age time.Duration) api.Finding {
	first := t0.Add(-age)
	return api.Finding{Kind: kind, Service: svc, Frontend: "10.96.0.10:80/TCP", Backend: backend, Detail: "d", FirstSeen: &first}
}

func inputs(fs ...api.Finding) Inputs {
	return Inputs{Status: api.Status{Node: "node-1", Datapath: "iptables", View: &api.View{Current: true},
		Watch: api.Watch{Synced: true, Healthy: true}, PendingChanges: 2, OldestPendingChangeSeconds: 0.1234}, Findings: fs}
}

func TestBuildBoundsFindingsOldestFirstAndCountsAll(t *testing.T) {
	var fs []api.Finding
	for i := range 30 {
		kind := "stale_backend"
		if i%3 == 0 {
			kind = "missing_backend"
		}
		fs = append(fs, finding(kind, "default/web", fmt.Sprintf("10.0.0.%d:8080", i), time.Duration(i)*time.Second))
	}
	r := Build(inputs(fs...), Options{AgentVersion: "v1", Heartbeat: 2 * time.Minute, MaxFindings: 5, Now: t0,
		NodeLag: map[string]api.Percentiles{"all": {Count: 3, P50: 0.0123456, Max: 0.5}}, LagSamples: 3})
	if len(r.Findings) != 5 || r.FindingsTotal != 30 {
		t.Fatalf("listed %d of total %d, want 5 of 30", len(r.Findings), r.FindingsTotal)
	}
	if r.FindingsByKind["missing_backend"] != 10 || r.FindingsByKind["stale_backend"] != 20 {
		t.Fatalf("by kind %v, want 10 missing_backend, 20 stale_backend", r.FindingsByKind)
	}
	for i, f := range r.Findings {
		if want := fmt.Sprintf("10.0.0.%d:8080", 29-i); f.Backend != want {
			t.Fatalf("finding %d is %s, want %s (oldest first)", i, f.Backend, want)
		}
	}
	if r.HeartbeatSeconds != 120 || !r.Heartbeat.Time.Equal(t0) || r.Lag.ByKind["all"].P50 != 0.012 || r.OldestPendingChangeSeconds != 0.123 {
		t.Fatalf("heartbeat %d %v, lag %+v, oldest pending %v", r.HeartbeatSeconds, r.Heartbeat, r.Lag, r.OldestPendingChangeSeconds)
	}
	if !r.View.Current || !r.Watch.Healthy || r.Datapath != "iptables" || r.AgentVersion != "v1" {
		t.Fatalf("view %+v watch %+v datapath %q version %q", r.View, r.Watch, r.Datapath, r.AgentVersion)
	}
}

func TestBuildWithoutFindingsOmitsThem(t *testing.T) {
	r := Build(inputs(), Options{MaxFindings: 5, Now: t0})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["findings"]; ok || m["findingsTotal"] != 0.0 {
		t.Fatalf("an empty report shows findings: %s", b)
	}
}

func TestDegradedNamesDownSourcesAndFallbacks(t *testing.T) {
	st := api.Status{Sources: []api.Source{{Name: "routes", Up: true}, {Name: "conntrack", Up: false, Error: "x"}},
		Fallbacks: []api.Fallback{{Reader: "change_events", From: "events", To: "polling"}}}
	got := fmt.Sprint(Degraded(st))
	if got != "[change_events: events -> polling source conntrack down]" {
		t.Fatalf("degraded %s", got)
	}
}

func TestKeyChangesWithFindingSetNotWithPendingOrDetail(t *testing.T) {
	a := finding("stale_backend", "default/web", "10.0.0.1:8080", time.Minute)
	b := finding("stale_backend", "default/web", "10.0.0.2:8080", time.Minute)
	route := func(subject string) api.Finding {
		f := finding("stale_route", "", "", time.Minute)
		f.Frontend, f.Subject = "", subject
		return f
	}
	base := Key(inputs(a, b))
	same := inputs(b, a)
	same.Status.PendingChanges, same.Status.OldestPendingChangeSeconds = 99, 42
	same.Findings[0].Detail, same.Findings[0].Evidence = "other", []string{"e"}
	if Key(same) != base {
		t.Fatal("the key changed with order, pending counts or detail")
	}
	if Key(inputs(a, route("10.244.5.0/24 via 10.99.0.15"))) == Key(inputs(a, route("10.244.6.0/24 via 10.99.0.16"))) {
		t.Error("two different stale routes (findings without a frontend) have one key")
	}
	for name, in := range map[string]Inputs{
		"one finding fewer": inputs(a),
		"another backend":   inputs(a, finding("stale_backend", "default/web", "10.0.0.3:8080", time.Minute)),
		"view blind":        func() Inputs { i := inputs(a, b); i.Status.View = &api.View{Code: "watch_unhealthy"}; return i }(),
		"watch unhealthy":   func() Inputs { i := inputs(a, b); i.Status.Watch.Healthy = false; return i }(),
		"datapath":          func() Inputs { i := inputs(a, b); i.Status.Datapath = "nftables"; return i }(),
		"degraded": func() Inputs {
			i := inputs(a, b)
			i.Status.Sources = []api.Source{{Name: "routes"}}
			return i
		}(),
	} {
		if Key(in) == base {
			t.Errorf("%s: the key did not change", name)
		}
	}
}

func TestPolicyDue(t *testing.T) {
	p := Policy{Heartbeat: 2 * time.Minute, MinInterval: 30 * time.Second}
	last := Written{Key: "k", At: t0}
	cases := []struct {
		name     string
		at       time.Duration
		key      string
		want     Reason
		nextWant time.Duration
	}{
		{"same key before heartbeat", 10 * time.Second, "k", NotDue, 2 * time.Minute},
		{"changed within min-interval", 10 * time.Second, "k2", NotDue, 30 * time.Second},
		{"changed after min-interval", 30 * time.Second, "k2", Changed, 30 * time.Second},
		{"first change after a quiet spell: at once", 90 * time.Second, "k2", Changed, 90 * time.Second},
		{"heartbeat", 2 * time.Minute, "k", Heartbeat, 2 * time.Minute},
	}
	for _, c := range cases {
		got, next := p.Due(t0.Add(c.at), c.key, last)
		if got != c.want || !next.Equal(t0.Add(c.nextWant)) {
			t.Errorf("%s: %q next %s, want %q next %s", c.name, got, next.Sub(t0), c.want, c.nextWant)
		}
	}
	if got, _ := p.Due(t0, "k", Written{}); got != First {
		t.Errorf("no write yet: %q, want first", got)
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Policy{Heartbeat: time.Second, MinInterval: time.Minute, MaxFindings: -1}
	err := bad.Validate()
	for _, flag := range []string{"--node-report-heartbeat", "--node-report-min-interval", "--node-report-max-findings"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("error %v does not name %s", err, flag)
		}
	}
}
