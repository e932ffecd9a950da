package bench

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/scenarios"
)

// nlMsg builds a netlink message of the nf_tables subsystem: family, then
// attributes given as (type, value) pairs.
func nlMsg(msg uint16, family uint8, attrs ...any) []byte {
	var body []byte
	body = append(body, family, 0, 0, 0)
	for i := 0; i < len(attrs); i += 2 {
		var v []byte
		switch x := attrs[i+1].(type) {
		case string:
			v = append([]byte(x), 0)
		case uint32:
			v = binary.BigEndian.AppendUint32(nil, x)
		}
		body = binary.NativeEndian.AppendUint16(body, uint16(4+len(v)))
		body = binary.NativeEndian.AppendUint16(body, attrs[i].(uint16))
		body = append(body, v...)
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
	}
	h := binary.NativeEndian.AppendUint32(nil, uint32(16+len(body)))
	h = binary.NativeEndian.AppendUint16(h, nfnlSubsysNFTables<<8|msg)
	h = append(h, make([]byte, 10)...)
	return append(h, body...)
}

func TestParseNFTDatagram(t *testing.T) {
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	var got []Commit
	add := func(c Commit) { got = append(got, c) }
	var tx txState
	// A transaction over two datagrams: an element and a rule of ip
	// kube-proxy, a chain of ip6 kube-proxy, then the NEWGEN.
	d1 := append(nlMsg(12, 2, uint16(1), "kube-proxy", uint16(2), "service-ips"), nlMsg(6, 2, uint16(1), "kube-proxy")...)
	d2 := append(nlMsg(3, 10, uint16(1), "kube-proxy"), nlMsg(nftMsgNewGen, 0, uint16(1), uint32(20), uint16(2), uint32(100), uint16(3), "nft")...)
	// The next one: a NEWGEN alone, naming no process.
	d3 := nlMsg(nftMsgNewGen, 0, uint16(1), uint32(21))
	for i, d := range [][]byte{d1, d2, d3} {
		if err := parseNFTDatagram(d, at(i+1), &tx, add); err != nil {
			t.Fatalf("datagram %d: %v", i+1, err)
		}
	}
	want := []Commit{
		{Gen: 20, PID: 100, Process: "nft", At: at(2), First: at(1), Tables: []string{"ip kube-proxy", "ip6 kube-proxy"}},
		{Gen: 21, PID: -1, At: at(3), First: at(3)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// Another subsystem's message is skipped; a truncated one is an error
	// and what came before it counts.
	got, tx = nil, txState{}
	other := nlMsg(nftMsgNewGen, 0, uint16(1), uint32(5))
	other[5] = 9 // NFNL_SUBSYS_... other than nf_tables
	bad := nlMsg(6, 2, uint16(1), "nat")
	bad = bad[:len(bad)-2]
	d := append(append(other, nlMsg(nftMsgNewGen, 0, uint16(1), uint32(22))...), bad...)
	if err := parseNFTDatagram(d, at(9), &tx, add); err == nil {
		t.Error("a truncated message was not an error")
	}
	if len(got) != 1 || got[0].Gen != 22 {
		t.Errorf("before the truncated message: %+v, want gen 22 only", got)
	}
	if err := parseNFTDatagram(nlMsg(nftMsgNewGen, 0, uint16(2), uint32(1)), at(10), &txState{}, add); err == nil {
		t.Error("a NEWGEN without a generation id was not an error")
	}
}

// TestMonitorReadsCommits runs the listener against real commits of nft in
// a network namespace of its own.
func TestMonitorReadsCommits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace and nft)")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed: " + err.Error())
	}
	ns := fmt.Sprintf("ndmon%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	bound := time.Now()
	m, err := StartMonitor("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			m.Stop()
		}
	})
	nft := func(script string) time.Time {
		t.Helper()
		cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nft: %v: %s", err, out)
		}
		return time.Now()
	}
	t0 := time.Now()
	nft("add table ip bench-a\nadd chain ip bench-a c\nadd table ip6 bench-b\n")
	var elems strings.Builder
	elems.WriteString("add set ip bench-a s { type ipv4_addr; }\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&elems, "add element ip bench-a s { 10.%d.%d.1 }\n", i/250, i%250)
	}
	t1 := nft(elems.String())
	var cs []Commit
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cs = m.Commits(); len(cs) >= 2 {
			break
		}
	}
	st := m.Stop()
	stopped = true
	if st.Err != nil || st.Overruns != 0 {
		t.Fatalf("listener: err %v, overruns %d", st.Err, st.Overruns)
	}
	t.Logf("listener: %+v; commits %+v", st, cs)
	if len(cs) != 2 {
		t.Fatalf("read %d commits, want 2: %+v", len(cs), cs)
	}
	if !reflect.DeepEqual(cs[0].Tables, []string{"ip bench-a", "ip6 bench-b"}) || !reflect.DeepEqual(cs[1].Tables, []string{"ip bench-a"}) {
		t.Errorf("tables %q, %q", cs[0].Tables, cs[1].Tables)
	}
	for i, c := range cs {
		if c.Process != "nft" || c.PID <= 0 || c.At.Before(t0) || c.At.After(t1.Add(time.Second)) || c.First.After(c.At) {
			t.Errorf("commit %d: %+v (window %s..%s)", i, c, t0.Format("15:04:05.000"), t1.Format("15:04:05.000"))
		}
	}
	if cs[1].Gen != cs[0].Gen+1 {
		t.Errorf("generations %d, %d: want consecutive", cs[0].Gen, cs[1].Gen)
	}
	if st.CPU < 0 || st.CPU > time.Since(bound) {
		t.Errorf("listener CPU %s over %s since the bind: counted from before it", st.CPU, time.Since(bound))
	}
	if st.Datagrams < 3 || st.Commits != 2 {
		t.Errorf("stats %+v: the 2000-element transaction fits in no one datagram", st)
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

// TestWorstMatches: an iptables-nft sync commits filter, then nat 30 ms
// later; a T2 dated by the filter commit matches the nat one (within the
// window) and the report names the filter commit as the one T2 sits on.
func TestWorstMatches(t *testing.T) {
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	cs := []Commit{
		{Gen: 7, First: at(0), At: at(1), Tables: []string{"ip filter"}},
		{Gen: 8, First: at(30), At: at(70), Tables: []string{"ip nat"}},
		{Gen: 9, First: at(1000), At: at(1040), Tables: []string{"ip nat"}},
	}
	t2s := []time.Time{at(1), at(1002), at(1001), at(5000)}
	t1s := []time.Time{at(-3000), at(1002), at(-2000), at(0)}
	got := WorstMatches(t2s, t1s, cs, monitorMatchWindow, ProxyTables("iptables-nft"), 2)
	if len(got) != 2 {
		t.Fatalf("got %d lines, want 2: %q", len(got), got)
	}
	want0 := "T2 29.0 ms before its commit's first datagram (gen 8, ip nat, read over 40.0 ms); T2 3001.0 ms after its T1 (the delivery); " +
		"nearest commit to T2: gen 7 (ip filter), T2 1.0 ms after its first datagram"
	if got[0] != want0 {
		t.Errorf("worst:\n got %q\nwant %q", got[0], want0)
	}
	if want1 := "T2 2.0 ms after its commit's first datagram (gen 9, ip nat, read over 40.0 ms); T2 0.0 ms after its T1 (the delivery)"; got[1] != want1 {
		t.Errorf("second:\n got %q\nwant %q", got[1], want1)
	}
	if got := WorstMatches(nil, nil, cs, monitorMatchWindow, ProxyTables("iptables-nft"), 3); len(got) != 0 {
		t.Errorf("no samples: %q", got)
	}
}
