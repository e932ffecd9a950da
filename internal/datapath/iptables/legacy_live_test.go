//go:build linux

package iptables

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// requireLegacy skips unless root with iptables-legacy and a kernel with
// ip_tables (ip6_tables for v6), saying why.
func requireLegacy(t *testing.T, v6 bool) {
	t.Helper()
	netnstest.RequireRoot(t, "restores iptables-legacy rules into a fresh network namespace")
	requireBackend(t, BackendLegacy, v6)
}

// legacySave runs iptables-legacy-save -t nat and -t filter in the netns.
func legacySave(t testing.TB, ns string, v6 bool) []byte {
	t.Helper()
	r := &runner{netns: ns, stats: &Stats{}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := r.dumpFamily(ctx, BackendLegacy, v6, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// legacyChains reads and decodes one table of the netns directly.
func legacyChains(t testing.TB, ns string, v6 bool, table string) ([]legacyChain, []byte) {
	t.Helper()
	fd, err := legacySocket(ns, v6)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	info, err := getInfo(fd, v6, table)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := getEntries(fd, v6, table, info, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unmapEntries(buf)
	blob := buf[getEntriesHdr:]
	zeroCounters(v6, blob)
	chains, err := decodeLegacyTable(v6, info, blob)
	if err != nil {
		t.Fatal(err)
	}
	return chains, append([]byte(nil), blob...) // the mapping goes with the return
}

// legacyRendered is the in-process decoder's text of every rule, per table.
func legacyRendered(t testing.TB, ns string, v6 bool) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range nlTables {
		chains, _ := legacyChains(t, ns, v6, table)
		for _, c := range chains {
			for _, r := range c.rules {
				if r.err != nil {
					t.Fatalf("%s %s: %v", table, c.name, r.err)
				}
				line := "-A " + c.name
				if r.args != "" {
					line += " " + r.args
				}
				out[table] = append(out[table], line)
			}
		}
	}
	return out
}

// legacyCrossCheck reads the netns both ways — iptables-legacy-save + Parse
// and the in-process reader — and requires the same rule text line by line
// and the same model.Observed.
func legacyCrossCheck(t *testing.T, ns string, v6 bool, hints model.Hints) *LegacyReader {
	t.Helper()
	d := Dumps{IPv4: legacySave(t, ns, false)}
	if v6 {
		d.IPv6 = legacySave(t, ns, true)
	}
	sameRuleText(t, d, v6, "iptables-legacy-save", "in-process decoder", func(fam bool) map[string][]string { return legacyRendered(t, ns, fam) })
	want, err := Parse(d, hints)
	if err != nil {
		t.Fatal(err)
	}
	lr := &LegacyReader{NetNS: ns, IPv6: v6}
	got, fresh, _, err := lr.Snapshot(context.Background(), hints, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !fresh {
		t.Error("first read not fresh")
	}
	assertSameObserved(t, got, want)
	return lr
}

// TestLegacyReaderCrossCheckFixtures: every iptables fixture, restored with
// iptables-legacy-restore, reads the same in process as through
// iptables-legacy-save + Parse (rule text, verdicts, evidence, warnings).
func TestLegacyReaderCrossCheckFixtures(t *testing.T) {
	requireLegacy(t, false)
	for _, fx := range crossCheckFixtures {
		t.Run(fx.v4, func(t *testing.T) {
			if fx.v6 != "" {
				requireLegacy(t, true)
			}
			ns := restoreFixtureWith(t, BackendLegacy, fx.v4, fx.v6)
			legacyCrossCheck(t, ns, fx.v6 != "", model.Hints{})
			if fx.v4 == "large-cluster.iptables-save" {
				legacyCrossCheck(t, ns, false, largeClusterOptions())
			}
		})
	}
}

const headerFormsV4 = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n:KUBE-A - [0:0]\n:USER - [0:0]\n" +
	"-A FORWARD -s 10.1.0.0/16 ! -d 10.2.3.4/32 -i eth0 ! -o veth+ -p tcp -m tcp --dport 80 -j ACCEPT\n" +
	"-A INPUT ! -i lo ! -p udp -f -j DROP\n" +
	"-A INPUT ! -f -p 47 -j USER\n" +
	"-A INPUT -s 10.0.0.0/255.0.255.0 -g KUBE-A\n" +
	"-A INPUT -d 192.168.0.1/32\n" +
	"-A KUBE-A -p sctp -m sctp --dport 3868 -j REJECT --reject-with icmp-port-unreachable\n" +
	"-A KUBE-A -m conntrack --ctstate INVALID -j DROP\n" +
	"-A KUBE-A -m state --state RELATED,ESTABLISHED -j ACCEPT\n" +
	"-A KUBE-A -j RETURN\n" +
	"-A USER -m mark --mark 0x4000/0x4000 -j QUEUE\n" +
	"COMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n"

const headerFormsV6 = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:KUBE-B - [0:0]\n" +
	"-A INPUT -s fd00::/64 ! -d 2001:db8::1/128 -i eth+ -p tcp -m tcp --dport 443 -j KUBE-B\n" +
	"-A INPUT -s ::ffff:10.0.0.1/128 -j DROP\n" +
	"-A INPUT -d ::10.0.0.1/128 -p ipv6-icmp -j ACCEPT\n" +
	"-A INPUT -s 2001:db8::/ffff:ffff::ff00:0 -g KUBE-B\n" +
	"-A KUBE-B -p udp -m udp --sport 53 -j REJECT --reject-with icmp6-port-unreachable\n" +
	"COMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
	"-A POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE --random-fully\n" +
	"-A PREROUTING -p tcp -m tcp --dport 8080 -j DNAT --to-destination [fd00::1]:80\n" +
	"COMMIT\n"

// TestLegacyReaderHeaderForms: the rule header forms kube-proxy and others
// write (inverted addresses and interfaces, wildcards, fragments, gotos,
// fall-through rules, protocols by number, non-prefix masks), v4 and v6,
// render as iptables-legacy-save prints them.
func TestLegacyReaderHeaderForms(t *testing.T) {
	requireLegacy(t, true)
	ns := newTestNetns(t)
	if err := restoreInto(ns, BackendLegacy, false, []byte(headerFormsV4)); err != nil {
		t.Fatal(err)
	}
	if err := restoreInto(ns, BackendLegacy, true, []byte(headerFormsV6)); err != nil {
		t.Fatal(err)
	}
	legacyCrossCheck(t, ns, true, model.Hints{})
}

// TestLegacyReaderUnchangedAndChanged: a second read of unchanged tables is
// not decoded or walked again and returns the same observation; a change of
// the same size (num_entries and size equal: GET_INFO alone would miss it)
// is seen; counters moving is not a change.
func TestLegacyReaderUnchangedAndChanged(t *testing.T) {
	requireLegacy(t, false)
	ns := restoreFixtureWith(t, BackendLegacy, "worker-a.iptables-save", "")
	lr := legacyCrossCheck(t, ns, false, model.Hints{})
	ctx := context.Background()
	st := lr.Stats()
	obs, fresh, kube, err := lr.Snapshot(ctx, model.Hints{}, 1)
	if err != nil || fresh || kube == 0 {
		t.Fatalf("unchanged read: err %v, fresh %v, %d KUBE chains", err, fresh, kube)
	}
	if s := lr.Stats(); s.Decodes != st.Decodes || s.Walks != st.Walks || s.Unchanged != st.Unchanged+1 {
		t.Errorf("unchanged read decoded or walked: %+v -> %+v", st, s)
	}
	// Traffic moves counters: still unchanged.
	if _, _, _, err := lr.Snapshot(ctx, model.Hints{}, 1); err != nil || lr.Stats().Decodes != st.Decodes {
		t.Fatalf("err %v, decodes %d", err, lr.Stats().Decodes)
	}
	// New hints: decoded and walked again (the decoded tables are dropped
	// after each walk; only the bytes' digests are kept).
	if _, fresh, _, err := lr.Snapshot(ctx, model.Hints{}, 2); err != nil || !fresh ||
		lr.Stats().Decodes <= st.Decodes || lr.Stats().Walks != st.Walks+1 {
		t.Fatalf("new hints: err %v, fresh %v, stats %+v -> %+v", err, fresh, st, lr.Stats())
	}
	st = lr.Stats()
	// Replace one endpoint's DNAT by another of the same size.
	rules := readTestdata(t, "worker-a.iptables-save")
	sep := firstMatch(t, rules, "-A KUBE-SEP-", 1)
	dump := string(legacySave(t, ns, false))
	var old string
	for _, l := range strings.Split(dump, "\n") {
		if strings.HasPrefix(l, "-A "+sep+" ") && strings.Contains(l, "--to-destination") {
			old = l
		}
	}
	if old == "" {
		t.Fatalf("no DNAT rule in %s", sep)
	}
	i := strings.LastIndex(old, "--to-destination ") + len("--to-destination ")
	dest := old[i:]
	repl := dest[:len(dest)-1] + string("98"[dest[len(dest)-1]%2]) // last port digit changed: same size
	before := infoOf(t, ns, "nat")
	argv := append([]string{"iptables-legacy", "-t", "nat", "-R", sep, ruleNumber(t, dump, sep, old)},
		strings.Fields(strings.Replace(old[len("-A "+sep+" "):], dest, repl, 1))...)
	netnstest.Run(t, ns, argv...)
	if after := infoOf(t, ns, "nat"); after.size != before.size || after.numEntries != before.numEntries {
		t.Logf("GET_INFO moved (%+v -> %+v); the test wanted a same-size change", before, after)
	}
	got, fresh, _, err := lr.Snapshot(ctx, model.Hints{}, 2)
	if err != nil || !fresh {
		t.Fatalf("after the change: err %v, fresh %v", err, fresh)
	}
	want, err := Parse(Dumps{IPv4: legacySave(t, ns, false)}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	assertSameObserved(t, got, want)
	if assertSameObservedQuiet(obs, got) {
		t.Error("the change is not in the observation")
	}
	// nat changed, filter did not: its decode was dropped after the last
	// walk, so the walk of the new nat decoded it again (2 decodes).
	if d := lr.Stats().Decodes - st.Decodes; d != 2 {
		t.Errorf("a change of nat alone: %d decodes, want 2 (nat, and filter decoded again for the walk)", d)
	}
	if c := lr.Stats().Copies - st.Copies; c != 3 {
		t.Errorf("a change of nat alone: %d tables copied, want 3 (nat and filter, then filter alone to decode it)", c)
	}
}

func assertSameObservedQuiet(a, b model.Observed) bool {
	if len(a.Frontends) != len(b.Frontends) {
		return false
	}
	for f, v := range a.Frontends {
		w, ok := b.Frontends[f]
		if !ok || len(v.Backends) != len(w.Backends) {
			return false
		}
		for i := range v.Backends {
			if v.Backends[i] != w.Backends[i] {
				return false
			}
		}
	}
	return true
}

func infoOf(t *testing.T, ns, table string) tableInfo {
	t.Helper()
	fd, err := legacySocket(ns, false)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	info, err := getInfo(fd, false, table)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// ruleNumber is the 1-based position of a rule line within its chain.
func ruleNumber(t *testing.T, dump, chain, line string) string {
	t.Helper()
	n := 0
	for _, l := range strings.Split(dump, "\n") {
		if strings.HasPrefix(l, "-A "+chain+" ") {
			n++
			if l == line {
				return strconv.Itoa(n)
			}
		}
	}
	t.Fatalf("rule %q not found", line)
	return ""
}

// TestLegacyReaderUndecodableFallsBack: a match the decoder does not know
// in a KUBE-* chain fails the read with ErrLegacyUndecodable and a reason naming
// it; in a chain kube-proxy's chains never reach, it is recorded and the
// read succeeds; once reached, the read fails.
func TestLegacyReaderUndecodableFallsBack(t *testing.T) {
	requireLegacy(t, false)
	for _, tc := range []struct {
		name, rule string
		fails      bool
	}{
		{"string match in KUBE-SERVICES", `-A KUBE-SERVICES -d 10.96.0.99/32 -p tcp -m string --string "GET /" --algo bm -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA`, true},
		{"u32 match in a KUBE-SVC chain", `-A KUBE-SVC-AAAAAAAAAAAAAAAA -m u32 --u32 "0>>22&0x3C@4=0x29" -j KUBE-SEP-BBBBBBBBBBBBBBBB`, true},
		{"string match in an unreached user chain", `-A USER-CHAIN -m string --string "x" --algo bm -j ACCEPT`, false},
		{"reached user chain", "-A KUBE-SVC-AAAAAAAAAAAAAAAA -j USER-CHAIN\n" + `-A USER-CHAIN -m string --string "x" --algo bm -j KUBE-SEP-BBBBBBBBBBBBBBBB`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newTestNetns(t)
			rules := "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]\n:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]\n:USER-CHAIN - [0:0]\n" +
				"-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment \"shop/web:http cluster IP\" -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA\n" +
				"-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m tcp -j DNAT --to-destination 10.1.0.1:8080\n" +
				tc.rule + "\n" +
				"-A KUBE-SVC-AAAAAAAAAAAAAAAA -j KUBE-SEP-BBBBBBBBBBBBBBBB\nCOMMIT\n*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n"
			if err := restoreInto(ns, BackendLegacy, false, []byte(rules)); err != nil {
				t.Skipf("kernel or iptables lacks the match: %v", err)
			}
			lr := &LegacyReader{NetNS: ns}
			obs, _, _, err := lr.Snapshot(context.Background(), model.Hints{}, 1)
			if !tc.fails {
				if err != nil {
					t.Fatal(err)
				}
				want, _ := Parse(Dumps{IPv4: legacySave(t, ns, false)}, model.Hints{})
				assertSameObserved(t, obs, want)
				return
			}
			if !errors.Is(err, ErrLegacyUndecodable) {
				t.Fatalf("want ErrLegacyUndecodable, got %v (%d frontends)", err, len(obs.Frontends))
			}
			t.Logf("reason: %v", err)
			if !strings.Contains(err.Error(), "not decoded") {
				t.Errorf("reason does not say what was not decoded: %v", err)
			}
		})
	}
}

// TestLegacyReaderNoTables: a namespace without legacy tables reads like
// iptables-legacy-save's path (no dump: warnings), and is not given any.
func TestLegacyReaderNoTables(t *testing.T) {
	requireLegacy(t, false)
	ns := newTestNetns(t)
	lr := &LegacyReader{NetNS: ns, IPv6: true}
	got, _, kube, err := lr.Snapshot(context.Background(), model.Hints{}, 1)
	if err != nil || kube != 0 {
		t.Fatalf("err %v, %d KUBE chains", err, kube)
	}
	want, err := Parse(Dumps{IPv4: []byte{}, IPv6: []byte{}}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	assertSameObserved(t, got, want)
	for _, f := range []string{"ip_tables_names", "ip6_tables_names"} {
		if names, _ := nsutil.ReadProcNet(ns, f); names != "" {
			t.Errorf("the read instantiated tables: %s: %q", f, names)
		}
	}
}

// TestWriteLegacyVectors (NETDRIFT_WRITE_LEGACY_VECTORS=1, root) dumps the
// kernel's GET_INFO / GET_ENTRIES bytes of restored rulesets, with what
// iptables-legacy-save printed for them, into testdata/legacy-entries.hex
// for the pure decoder tests (TestDecodeLegacyCaptured).
func TestWriteLegacyVectors(t *testing.T) {
	if os.Getenv("NETDRIFT_WRITE_LEGACY_VECTORS") == "" {
		t.Skip("set NETDRIFT_WRITE_LEGACY_VECTORS=1 to rewrite testdata/legacy-entries.hex")
	}
	requireLegacy(t, true)
	var out strings.Builder
	uname, _ := exec.Command("uname", "-r").Output()
	ver, _ := exec.Command("iptables-legacy", "--version").Output()
	fmt.Fprintf(&out, "# GET_INFO (ipt_getinfo, 84 bytes) and GET_ENTRIES entries (counters zeroed) as the kernel (%s)\n"+
		"# returned them after iptables-legacy-restore (%s) loaded the named ruleset into a fresh netns;\n"+
		"# \"save\" lines are what iptables-legacy-save printed for the table. Written by TestWriteLegacyVectors.\n",
		strings.TrimSpace(string(uname)), strings.TrimSpace(string(ver)))
	for _, v := range []struct {
		name, rules string
		v6          bool
		tables      []string
	}{
		{"testdata/restore-input.iptables", string(readTestdata(t, "restore-input.iptables")), false, []string{"nat", "filter"}},
		{"testdata/dualstack.v4.iptables-save", string(readTestdata(t, "dualstack.v4.iptables-save")), false, []string{"nat"}},
		{"testdata/dualstack.v6.iptables-save", string(readTestdata(t, "dualstack.v6.iptables-save")), true, []string{"nat", "filter"}},
		{"header forms (v4)", headerFormsV4, false, []string{"filter"}},
		{"header forms (v6)", headerFormsV6, true, []string{"filter", "nat"}},
	} {
		ns := newTestNetns(t)
		addNFAcct(t, ns, []byte(v.rules))
		if err := restoreInto(ns, BackendLegacy, v.v6, []byte(v.rules)); err != nil {
			t.Fatal(err)
		}
		saved := savedRules(legacySave(t, ns, v.v6))
		for _, table := range v.tables {
			fd, err := legacySocket(ns, v.v6)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, getinfoSize)
			copy(buf, table)
			if _, err := getsockopt(fd, sockLevel(v.v6), iptSoGetInfo, buf); err != nil {
				t.Fatal(err)
			}
			info, _ := parseInfo(buf)
			entries, err := getEntries(fd, v.v6, table, info, nil)
			unix.Close(fd)
			if err != nil {
				t.Fatal(err)
			}
			defer unmapEntries(entries)
			blob := entries[getEntriesHdr:]
			zeroCounters(v.v6, blob)
			fam := 4
			if v.v6 {
				fam = 6
			}
			fmt.Fprintf(&out, "vector %s ipv%d %s\ninfo %s\nblob %s\n", strings.ReplaceAll(v.name, " ", "_"), fam, table,
				hex.EncodeToString(buf), hex.EncodeToString(blob))
			for _, l := range saved[table] {
				fmt.Fprintf(&out, "save %s\n", l)
			}
		}
	}
	if err := os.WriteFile("testdata/legacy-entries.hex", []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
