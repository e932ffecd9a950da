package scenarios

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP netdrift_terminating_rsts_total x
# TYPE netdrift_terminating_rsts_total counter
netdrift_terminating_rsts_total{namespace="default",service="roll"} 17
netdrift_terminating_rsts_total{namespace="default",service="other"} 3
netdrift_terminating_rsts_total{namespace="kube-system",service="roll"} 5
netdrift_watch_healthy 1
netdrift_findings{kind="stale_backend"} 2 1700000000000
odd_label{detail="a \"quoted\" \\ value, with }",x="1"} +Inf
`
	s, err := ParseMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		match map[string]string
		want  float64
		found bool
	}{
		{"netdrift_terminating_rsts_total", map[string]string{"namespace": "default", "service": "roll"}, 17, true},
		{"netdrift_terminating_rsts_total", map[string]string{"service": "roll"}, 22, true},
		{"netdrift_terminating_rsts_total", nil, 25, true},
		{"netdrift_watch_healthy", nil, 1, true},
		{"netdrift_findings", map[string]string{"kind": "stale_backend"}, 2, true},
		{"netdrift_findings", map[string]string{"kind": "stale_route"}, 0, false},
		{"missing", nil, 0, false},
	} {
		got, found := s.Sum(c.name, c.match)
		if got != c.want || found != c.found {
			t.Errorf("Sum(%s, %v) = %v, %v; want %v, %v", c.name, c.match, got, found, c.want, c.found)
		}
	}
	if got := s[len(s)-1].Labels["detail"]; got != `a "quoted" \ value, with }` {
		t.Errorf("escaped label = %q", got)
	}
}

func TestParseMetricsErrors(t *testing.T) {
	for _, bad := range []string{
		"ok 1\nnovalue\n",
		"ok 1\nx{a=\"1\" 2\n",
		"x{a=1} 2\n",
		"x 1 2 3\n",
		"x abc\n",
	} {
		_, err := ParseMetrics(bad)
		if err == nil || !strings.Contains(err.Error(), "line ") {
			t.Errorf("ParseMetrics(%q) error = %v, want one naming the line", bad, err)
		}
	}
}

func TestParseSyncs(t *testing.T) {
	f, err := os.Open("testdata/kube-proxy.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseSyncs(f, 2026, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04:05.000000", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := []Sync{
		{Start: at("2026-11-29 20:41:07.402511"), Complete: at("2026-11-29 20:41:07.471903"), Line: 3},
		{Start: at("2026-11-29 20:41:08.000000"), Complete: at("2026-11-29 20:41:09.250000"), Line: 6},
		{Start: at("2026-11-29 20:41:11.099150"), Complete: at("2026-11-29 20:41:11.100000"), Line: 7},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d syncs %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || !got[i].Complete.Equal(want[i].Complete) || got[i].Line != want[i].Line {
			t.Errorf("sync %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseSyncsErrors(t *testing.T) {
	for _, bad := range []string{
		`I1129 20:41:07 1 p.go:1] "SyncProxyRules complete" elapsed="1ms"`,
		`I1329 20:41:07.000001 1 p.go:1] "SyncProxyRules complete" elapsed="1ms"`,
		`I1129 20:41:07.000001 1 p.go:1] "SyncProxyRules complete" ipFamily="IPv4"`,
		`I1129 20:41:07.000001 1 p.go:1] "SyncProxyRules complete" elapsed="soon"`,
		`"SyncProxyRules complete" elapsed="1ms"`,
	} {
		_, err := ParseSyncs(strings.NewReader("I1129 20:41:00.000000 1 a.go:1] \"hello\"\n"+bad+"\n"), 2026, time.UTC)
		if err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("ParseSyncs(%q) error = %v, want one naming line 2", bad, err)
		}
	}
}

func TestMatchSync(t *testing.T) {
	base := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	syncs := []Sync{
		{Start: ms(0), Complete: ms(100), Line: 1},
		{Start: ms(1000), Complete: ms(1300), Line: 2},
		{Start: ms(5000), Complete: ms(5050), Line: 3},
	}
	for _, c := range []struct {
		t2   int
		line int
		ok   bool
	}{
		{105, 1, true},   // just after the first sync's completion
		{1290, 2, true},  // seen before the log line was written
		{2000, 2, true},  // late observation: still the nearest completed sync
		{4990, 3, true},  // within the 50 ms slack before sync 3 starts... nearest completion is 3
		{4900, 2, true},  // sync 3 starts after t2 + slack: not a candidate
		{-100, 0, false}, // before every sync
	} {
		got, ok := MatchSync(syncs, ms(c.t2), 50*time.Millisecond)
		if ok != c.ok || (ok && got.Line != c.line) {
			t.Errorf("MatchSync(t2=%dms) = line %d, %v; want line %d, %v", c.t2, got.Line, ok, c.line, c.ok)
		}
	}
}

func TestQuantile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond, 0: time.Millisecond} {
		if got := Quantile(ds, q); got != want {
			t.Errorf("Quantile(%v) = %s, want %s", q, got, want)
		}
	}
	if Quantile(nil, .99) != 0 {
		t.Error("Quantile(nil) != 0")
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("Quantile sorted its input in place")
	}
}

func TestNormalizeIPTablesSave(t *testing.T) {
	a := "# Generated by iptables-save v1.8.9 on Sun Nov 29 20:41:07 2026\n*nat\n:PREROUTING ACCEPT [12:720]\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -j KUBE-SERVICES\nCOMMIT\n# Completed on Sun Nov 29 20:41:07 2026\n"
	b := "# Generated by iptables-save v1.8.9 on Sun Nov 29 20:49:00 2026\n*nat\n:PREROUTING ACCEPT [99:5940]\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -j KUBE-SERVICES\nCOMMIT\n# Completed on Sun Nov 29 20:49:00 2026\n"
	if NormalizeIPTablesSave(a) != NormalizeIPTablesSave(b) {
		t.Errorf("dump time and counters still differ:\n%s\n%s", NormalizeIPTablesSave(a), NormalizeIPTablesSave(b))
	}
	c := strings.Replace(b, "-A PREROUTING -j KUBE-SERVICES\n", "", 1)
	if NormalizeIPTablesSave(a) == NormalizeIPTablesSave(c) {
		t.Error("a removed rule is not a difference")
	}
}

func TestNormalizeConntrack(t *testing.T) {
	a := `tcp      6 431999 ESTABLISHED src=10.99.0.12 dst=10.96.0.10 sport=40000 dport=80 src=10.244.3.2 dst=10.99.0.12 sport=8080 dport=40000 [ASSURED] mark=0 use=1
tcp      6 86399 ESTABLISHED src=10.99.0.12 dst=10.99.0.1 sport=51000 dport=6443 src=10.99.0.1 dst=10.99.0.12 sport=6443 dport=51000 [ASSURED] mark=0 use=1
udp      17 29 src=10.99.0.12 dst=10.99.0.1 sport=5353 dport=53 [UNREPLIED] src=10.99.0.1 dst=10.99.0.12 sport=53 dport=5353 mark=0 use=1
`
	b := `udp      17 3 src=10.99.0.12 dst=10.99.0.1 sport=5353 dport=53 [UNREPLIED] src=10.99.0.1 dst=10.99.0.12 sport=53 dport=5353 mark=0 use=1
tcp      6 431950 ESTABLISHED src=10.99.0.12 dst=10.96.0.10 sport=40000 dport=80 src=10.244.3.2 dst=10.99.0.12 sport=8080 dport=40000 [ASSURED] mark=0 use=1
tcp      6 86399 ESTABLISHED src=10.99.0.12 dst=10.99.0.1 sport=52000 dport=6443 src=10.99.0.1 dst=10.99.0.12 sport=6443 dport=52000 [ASSURED] mark=0 use=1
`
	a += "tcp      6 100 TIME_WAIT src=10.99.0.11 dst=10.244.2.3 sport=36256 dport=8080 src=10.244.2.3 dst=10.99.0.11 sport=8080 dport=36256 [ASSURED] mark=0 use=1\n"
	ports := []string{"6443"}
	if NormalizeConntrack(a, ports) != NormalizeConntrack(b, ports) {
		t.Errorf("timers, order and own flows still differ:\n%s\n--\n%s", NormalizeConntrack(a, ports), NormalizeConntrack(b, ports))
	}
	c := strings.Replace(b, "dport=80 src=10.244.3.2", "dport=80 src=10.244.3.9", 1)
	if NormalizeConntrack(a, ports) == NormalizeConntrack(c, ports) {
		t.Error("a rewritten DNAT is not a difference")
	}
}
