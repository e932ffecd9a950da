package bench

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/scenarios"
)

func TestParseGenLine(t *testing.T) {
	for _, c := range []struct {
		line string
		gen  uint32
		pid  int
		name string
	}{
		{"# new generation 12 by process 3456 (nft)", 12, 3456, "nft"},
		{"# new generation 7 by process 32669 (iptables-nft-re)\n", 7, 32669, "iptables-nft-re"},
		{"# new generation 4294967295 by process 1 (a (b) c)", 4294967295, 1, "a (b) c"},
		{"# new generation 9", 9, -1, ""},
	} {
		g, p, n, ok, err := ParseGenLine(c.line)
		if err != nil || !ok || g != c.gen || p != c.pid || n != c.name {
			t.Errorf("%q: got %d %d %q %v %v", c.line, g, p, n, ok, err)
		}
	}
	for _, line := range []string{"add table ip t", "", "# xt_comment", "new generation 3 by process 1 (nft)"} {
		if _, _, _, ok, err := ParseGenLine(line); ok || err != nil {
			t.Errorf("%q: taken as a generation line (ok %v, err %v)", line, ok, err)
		}
	}
	for _, line := range []string{"# new generation x by process 1 (nft)", "# new generation 3 by process y (nft)",
		"# new generation 3 by pid 1 (nft)", "# new generation 3 by process 1 nft", "# new generation 4294967296"} {
		if _, _, _, ok, err := ParseGenLine(line); ok || err == nil {
			t.Errorf("%q: accepted (ok %v)", line, ok)
		}
	}
}

func TestParseMonitorEvents(t *testing.T) {
	for line, want := range map[string]string{
		"add element ip kube-proxy service-ips { 10.96.0.10 . tcp . 53 : goto service-X }": "ip kube-proxy",
		"delete rule ip nat KUBE-SVC-ABC handle 12":                                        "ip nat",
		"add table ip6 kube-proxy":                                                         "ip6 kube-proxy",
		"create chain ip nat FOO":                                                          "ip nat",
	} {
		if got, ok := EventTable(line); !ok || got != want {
			t.Errorf("%q: got %q %v, want %q", line, got, ok, want)
		}
	}
	for _, line := range []string{"# new generation 3 by process 1 (nft)", "add table", "list table ip t", "add rule nonsense t c"} {
		if got, ok := EventTable(line); ok {
			t.Errorf("%q: took it as an event of %q", line, got)
		}
	}

	// A whole stream: events belong to the next generation line, which is
	// stamped when it is read; garbage is skipped but counted.
	out := strings.Join([]string{
		"add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 443 : goto s1 }",
		"delete element ip kube-proxy service-ips { 10.96.0.2 . tcp . 80 : goto s2 }",
		"add rule ip kube-proxy s3 ip daddr 10.1.0.5 counter",
		"# new generation 20 by process 100 (nft)",
		"add rule ip6 kube-proxy s4 counter",
		"# new generation 21 by process 101 (nft)",
		"# new generation bogus",
		"# new generation 22 by process 102 (iptables-nft)",
	}, "\n") + "\n"
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	n := 0
	now := func() time.Time { n++; return base.Add(time.Duration(n) * time.Millisecond) }
	var got []Commit
	lines, err := scanMonitor(strings.NewReader(out), now, func(c Commit) { got = append(got, c) })
	if err != nil || lines != 8 {
		t.Fatalf("lines %d, err %v", lines, err)
	}
	at := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	want := []Commit{
		{Gen: 20, PID: 100, Process: "nft", At: at(4), First: at(1), Tables: []string{"ip kube-proxy"}},
		{Gen: 21, PID: 101, Process: "nft", At: at(6), First: at(5), Tables: []string{"ip6 kube-proxy"}},
		// the unreadable generation line opens this one's transaction
		{Gen: 22, PID: 102, Process: "iptables-nft", At: at(8), First: at(7)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestMatchCommit(t *testing.T) {
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	v4 := []string{"ip kube-proxy"}
	cs := []Commit{
		{Gen: 1, At: at(0), Tables: v4},
		{Gen: 2, At: at(30), Tables: []string{"ip6 kube-proxy"}}, // the IPv6 proxier's: never a match
		{Gen: 3, At: at(1000), Tables: []string{"ip6 kube-proxy", "ip kube-proxy"}},
		{Gen: 4, At: at(1040), Tables: v4},
	}
	for _, c := range []struct {
		t2  int
		gen uint32 // 0: unmatched
	}{
		{2, 1},
		{-50, 1},  // the window is inclusive
		{29, 1},   // nearer to gen 2, but gen 2 is not kube-proxy's IPv4 table
		{51, 0},   // outside ±50 ms of gen 1, gen 2 does not count
		{1019, 3}, // nearest of two candidates
		{1021, 4},
		{1091, 0},
		{500, 0},
	} {
		got, ok := MatchCommit(cs, at(c.t2), monitorMatchWindow, v4)
		if (c.gen == 0) == ok || (ok && got.Gen != c.gen) {
			t.Errorf("T2 at %d ms: got gen %d (ok %v), want %d", c.t2, got.Gen, ok, c.gen)
		}
	}
	if _, ok := MatchCommit(cs, at(0), monitorMatchWindow, ProxyTables("iptables-nft")); ok {
		t.Error("an nftables-mode commit matched the iptables-nft tables")
	}
	// A large transaction: read over 200 ms; a T2 inside its span is 0
	// from it, one 40 ms before it still matches, 60 ms before does not.
	big := []Commit{{Gen: 5, First: at(0), At: at(200), Tables: v4}}
	for t2, want := range map[int]bool{100: true, -40: true, -60: false, 250: true, 251: false} {
		if _, ok := MatchCommit(big, at(t2), monitorMatchWindow, v4); ok != want {
			t.Errorf("T2 at %d ms against a 0-200 ms span: matched %v, want %v", t2, ok, want)
		}
	}
	// iptables-nft: one sync commits filter, then nat; only nat's counts.
	ipt := []Commit{{Gen: 7, At: at(0), Tables: []string{"ip filter"}}, {Gen: 8, At: at(9), Tables: []string{"ip nat"}}}
	if got, ok := MatchCommit(ipt, at(1), monitorMatchWindow, ProxyTables("iptables-nft")); !ok || got.Gen != 8 {
		t.Errorf("iptables-nft: got gen %d (ok %v), want the nat commit 8", got.Gen, ok)
	}
	if ProxyTables("iptables-legacy") != nil {
		t.Error("iptables-legacy has nf_tables tables")
	}
}

func TestMatchSamplesQuantiles(t *testing.T) {
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	v4 := []string{"ip nat", "ip filter"}
	var cs []Commit
	var t2s []time.Time
	// 100 commits a second apart; sample k is dated k/10 ms after (or,
	// every fourth, before) its commit: |diffs| 0.0 .. 9.9 ms.
	for k := 0; k < 100; k++ {
		c := base.Add(time.Duration(k) * time.Second)
		cs = append(cs, Commit{Gen: uint32(k), At: c, First: c.Add(-time.Duration(k%3) * time.Millisecond), Tables: []string{"ip filter"}})
		d := time.Duration(k) * 100 * time.Microsecond
		if k%4 == 3 {
			d = -d
		}
		t2s = append(t2s, c.Add(d))
	}
	t2s = append(t2s, base.Add(500*time.Millisecond), base.Add(200*time.Second)) // two without a commit
	m := MatchSamples(t2s, cs, monitorMatchWindow, v4)
	if len(m.Diffs) != 100 || len(m.Spans) != 100 || len(m.FromFirst) != 100 || m.Unmatched != 2 || m.T2After != 75 {
		t.Fatalf("matched %d, unmatched %d, T2 after %d; want 100, 2, 75", len(m.Diffs), m.Unmatched, m.T2After)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{.5, 4900 * time.Microsecond}, {.9, 8900 * time.Microsecond}, {.99, 9800 * time.Microsecond}, {1, 9900 * time.Microsecond}} {
		if got := scenarios.Quantile(m.Diffs, c.q); got != c.want {
			t.Errorf("q%.2f: %v, want %v", c.q, got, c.want)
		}
	}
	x := Window{MonTables: v4, MonRunning: true, MonMatch: m, MonCommits: 100}
	if got := monCells(x); got[0] != "100" || got[1] != "100" || got[2] != "2" || got[3] != "4.9 ms" || got[6] != "9.9 ms" || got[7] != "75/100" || got[8] != "1.0 ms / 2.0 ms" || got[9] != "5.4 ms / 11.2 ms" {
		t.Errorf("report cells %q", got)
	}
	if got := monCells(Window{}); len(got) != 10 || got[0] != "n/a (no nf_tables events)" {
		t.Errorf("iptables-legacy cells %q", got)
	}
}
