//go:build linux

package iptables

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// requireNFT skips unless root with iptables-nft and an nf_tables kernel.
func requireNFT(t testing.TB, v6 bool) {
	t.Helper()
	netnstest.RequireRoot(t, "restores iptables-nft rules into a fresh network namespace")
	requireBackend(t, BackendNFT, v6)
}

// nftSave runs iptables-nft-save -t nat and -t filter in the netns.
func nftSave(t testing.TB, ns string, v6 bool) []byte {
	t.Helper()
	r := &runner{netns: ns, stats: &Stats{}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := r.dumpFamily(ctx, BackendNFT, v6, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// savedRules lists the "-A" lines of a dump per table, in order.
func savedRules(dump []byte) map[string][]string {
	out := map[string][]string{}
	table := ""
	for _, l := range strings.Split(string(dump), "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, "-A "):
			out[table] = append(out[table], l)
		}
	}
	return out
}

// renderedRules is the netlink decoder's text of every rule, per table.
func renderedRules(t testing.TB, ns string, v6 bool) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := func() error {
		c, err := dialNFT(ns)
		if err != nil {
			return err
		}
		defer c.Close()
		for _, table := range nlTables {
			chains, _, err := listChains(c, v6, table)
			if err != nil {
				return err
			}
			byChain := map[string][]string{}
			err = dumpRules(c, v6, table, "", func(r nlRule, derr error) error {
				if derr != nil {
					return derr
				}
				line := "-A " + r.chain
				if r.args != "" {
					line += " " + r.args
				}
				byChain[r.chain] = append(byChain[r.chain], line)
				return nil
			})
			if err != nil {
				return err
			}
			// iptables-nft-save lists built-in chains first, then user chains sorted.
			slices.SortStableFunc(chains, func(a, b string) int {
				ab, bb := isBuiltin(a), isBuiltin(b)
				switch {
				case ab && !bb:
					return -1
				case bb && !ab:
					return 1
				case ab && bb:
					return 0
				}
				return strings.Compare(a, b)
			})
			for _, ch := range chains {
				out[table] = append(out[table], byChain[ch]...)
			}
		}
		return nil
	}()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func isBuiltin(c string) bool {
	switch c {
	case "PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING":
		return true
	}
	return false
}

// crossCheck reads the netns both ways and requires the same model.
func crossCheck(t *testing.T, ns string, v6 bool, hints model.Hints) *NFTReader {
	t.Helper()
	d := Dumps{IPv4: nftSave(t, ns, false)}
	if v6 {
		d.IPv6 = nftSave(t, ns, true)
	}
	// The rule text first: a mismatch here names the rule.
	sameRuleText(t, d, v6, "iptables-nft-save", "netlink decoder", func(fam bool) map[string][]string { return renderedRules(t, ns, fam) })
	want, err := Parse(d, hints)
	if err != nil {
		t.Fatal(err)
	}
	nr := &NFTReader{NetNS: ns, IPv6: v6}
	got, err := nr.Snapshot(context.Background(), hints)
	if err != nil {
		t.Fatal(err)
	}
	assertSameObserved(t, got, want)
	return nr
}

func assertSameObserved(t *testing.T, got, want model.Observed) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	for f, w := range want.Frontends {
		if g, ok := got.Frontends[f]; !ok {
			t.Errorf("netlink reader misses %s %s", f.Kind, f)
		} else if !reflect.DeepEqual(g, w) {
			t.Errorf("%s %s:\nnetlink %+v\nsave    %+v", f.Kind, f, g, w)
		}
	}
	for f := range got.Frontends {
		if _, ok := want.Frontends[f]; !ok {
			t.Errorf("netlink reader has extra %s %s", f.Kind, f)
		}
	}
	if !reflect.DeepEqual(got.Warnings, want.Warnings) {
		t.Errorf("warnings differ:\nnetlink %q\nsave    %q", got.Warnings, want.Warnings)
	}
	if got.Datapath != want.Datapath {
		t.Errorf("datapath %q, want %q", got.Datapath, want.Datapath)
	}
}

// crossCheckFixtures are the iptables fixtures every in-process reader is
// cross-checked on (v6 "" for IPv4 only).
var crossCheckFixtures = []struct{ v4, v6 string }{
	{"worker-a.iptables-save", ""},
	{"stale.worker-a.iptables-save", ""},
	{"large-cluster.iptables-save", ""},
	{"stale-chains.iptables-save", ""},
	{"restore-input.iptables", ""},
	{"restore-input.roundtrip.iptables-save", ""},
	{"dualstack.v4.iptables-save", "dualstack.v6.iptables-save"},
}

// restoreFixture loads a fixture (nfacct objects first) into a fresh netns
// with the nft backend.
func restoreFixture(t *testing.T, v4name, v6name string) string {
	t.Helper()
	return restoreFixtureWith(t, BackendNFT, v4name, v6name)
}

// restoreFixtureWith loads a fixture with the given backend's restore tool.
func restoreFixtureWith(t *testing.T, backend, v4name, v6name string) string {
	t.Helper()
	ns := newTestNetns(t)
	for _, f := range []struct {
		name string
		v6   bool
	}{{v4name, false}, {v6name, true}} {
		if f.name == "" {
			continue
		}
		rules := readTestdata(t, f.name)
		addNFAcct(t, ns, rules)
		if err := restoreInto(ns, backend, f.v6, rules); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// TestNFTReaderCrossCheckFixtures: every iptables fixture, restored with
// iptables-nft-restore, reads the same through the netlink reader as
// through iptables-nft-save + Parse (rule text, verdicts, evidence, warnings).
func TestNFTReaderCrossCheckFixtures(t *testing.T) {
	requireNFT(t, false)
	for _, fx := range crossCheckFixtures {
		t.Run(fx.v4, func(t *testing.T) {
			if fx.v6 != "" {
				requireNFT(t, true)
			}
			ns := restoreFixture(t, fx.v4, fx.v6)
			crossCheck(t, ns, fx.v6 != "", model.Hints{})
			if fx.v4 == "large-cluster.iptables-save" {
				crossCheck(t, ns, false, largeClusterOptions())
			}
		})
	}
}

// TestNFTReaderEmptyNetns: no tables at all reads like iptables-nft-save's
// output for them.
func TestNFTReaderEmptyNetns(t *testing.T) {
	requireNFT(t, false)
	crossCheck(t, newTestNetns(t), true, model.Hints{})
}

// TestNFTReaderChangeRereadsNamedChains: mutations delivered as change
// events re-read only the chains they name, and the result is what a full
// read gives.
func TestNFTReaderChangeRereadsNamedChains(t *testing.T) {
	requireNFT(t, false)
	ns := restoreFixture(t, "worker-a.iptables-save", "")
	nr := crossCheck(t, ns, false, model.Hints{})
	full := nr.Stats().FullReads
	ctx := context.Background()
	rules := readTestdata(t, "worker-a.iptables-save")
	svc := firstMatch(t, rules, "-A KUBE-SVC-", 1)
	sep := firstMatch(t, rules, "-A KUBE-SEP-", 1)
	steps := []struct {
		name   string
		argv   []string
		change []nfevents.Change
	}{
		{"flush a service chain", []string{"iptables-nft", "-t", "nat", "-F", svc},
			[]nfevents.Change{{Family: "ip", Table: "nat", Object: "rule", Name: svc}}},
		{"delete a rule", []string{"iptables-nft", "-t", "nat", "-D", sep, "1"},
			[]nfevents.Change{{Family: "ip", Table: "nat", Object: "rule", Name: sep}}},
		{"add an endpoint chain", nil, []nfevents.Change{
			{Family: "ip", Table: "nat", Object: "chain", Name: "KUBE-SEP-NDTESTNDTESTNDTE"},
			{Family: "ip", Table: "nat", Object: "rule", Name: "KUBE-SEP-NDTESTNDTESTNDTE"},
			{Family: "ip", Table: "nat", Object: "rule", Name: svc}}},
	}
	if _, err := nr.Snapshot(ctx, model.Hints{}); err != nil {
		t.Fatal(err)
	}
	prev, _ := nr.Frozen() // the snapshot's frontends change in place: keep a copy
	walks := nr.Stats().Walks
	for _, st := range steps {
		if st.argv != nil {
			netnstest.Run(t, ns, st.argv...)
		} else {
			netnstest.Run(t, ns, "iptables-nft", "-t", "nat", "-N", "KUBE-SEP-NDTESTNDTESTNDTE")
			netnstest.Run(t, ns, "iptables-nft", "-t", "nat", "-A", "KUBE-SEP-NDTESTNDTESTNDTE", "-p", "tcp", "-m", "tcp", "-j", "DNAT", "--to-destination", "10.99.0.1:8080")
			netnstest.Run(t, ns, "iptables-nft", "-t", "nat", "-A", svc, "-j", "KUBE-SEP-NDTESTNDTESTNDTE")
		}
		gen := currentGen(t, ns)
		if err := nr.ApplyChanges(ctx, gen, false, st.change); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got, want := nr.Stats().LastChains, distinctChains(st.change); got != want {
			t.Errorf("%s: re-read %d chains, want %d (the ones the event names)", st.name, got, want)
		}
		stats := nr.Stats()
		// Only the frontends that reach the chain are resolved again: the
		// service's cluster IP and node port groups, not the table.
		if stats.Walks != walks || stats.LastGroups == 0 || stats.LastGroups > 3 {
			t.Errorf("%s: %d full walks (want %d), %d frontend groups re-resolved (want 1-3)", st.name, stats.Walks, walks, stats.LastGroups)
		}
		got, err := nr.Snapshot(ctx, model.Hints{})
		if err != nil {
			t.Fatal(err)
		}
		if nr.Stats().FullReads != full {
			t.Fatalf("%s: a full read ran (generation %d not reflected)", st.name, gen)
		}
		if stats.LastChanged == 0 { // re-resolved, nothing differs: the same state, the same version
			if got.Version != prev.Version {
				t.Errorf("%s: nothing changed but the version moved", st.name)
			}
		} else if got.Version == prev.Version || got.Since != prev.Version || got.Changed == nil || len(got.Changed) != stats.LastChanged {
			t.Errorf("%s: version %d since %d (previous %d), %d changed (stats %d)", st.name, got.Version, got.Since, prev.Version, len(got.Changed), stats.LastChanged)
		}
		for f := range diffVerdicts(prev.Frontends, got.Frontends) {
			if !got.Changed[f] {
				t.Errorf("%s: %s %s differs but is not in Changed", st.name, f.Kind, f)
			}
		}
		t.Logf("%s: %d chains re-read, %d frontend groups re-resolved (table: %d frontends), %d frontends changed",
			st.name, stats.LastChains, stats.LastGroups, len(got.Frontends), stats.LastChanged)
		prev, _ = nr.Frozen()
		want, err := Parse(Dumps{IPv4: nftSave(t, ns, false)}, model.Hints{})
		if err != nil {
			t.Fatal(err)
		}
		assertSameObserved(t, got, want)
	}
	// An event for a generation the reader has not seen, not delivered: the
	// reader first waits for it (kube-proxy commits a sync as several
	// transactions), then, past BehindLimit, reads everything rather than
	// answer from the cache.
	nr.BehindLimit = 50 * time.Millisecond
	netnstest.Run(t, ns, "iptables-nft", "-t", "nat", "-F", "KUBE-SEP-NDTESTNDTESTNDTE")
	if _, err := nr.Snapshot(ctx, model.Hints{}); err != nil || nr.Stats().FullReads != full {
		t.Errorf("a change whose event may still come: err %v, %d full reads, want %d (wait for the event)", err, nr.Stats().FullReads, full)
	}
	time.Sleep(60 * time.Millisecond)
	got, err := nr.Snapshot(ctx, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	if nr.Stats().FullReads != full+1 {
		t.Errorf("undelivered change: %d full reads, want %d", nr.Stats().FullReads, full+1)
	}
	want, _ := Parse(Dumps{IPv4: nftSave(t, ns, false)}, model.Hints{})
	assertSameObserved(t, got, want)
	// Lost events drop the cache.
	if err := nr.ApplyChanges(ctx, currentGen(t, ns), true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := nr.Snapshot(ctx, model.Hints{}); err != nil || nr.Stats().FullReads != full+2 {
		t.Errorf("lost events: err %v, %d full reads, want %d", err, nr.Stats().FullReads, full+2)
	}
}

// diffVerdicts names the frontends whose verdict differs between a and b.
func diffVerdicts(a, b map[model.Frontend]model.Verdict) map[model.Frontend]bool {
	out := map[model.Frontend]bool{}
	for f, v := range a {
		if w, ok := b[f]; !ok || !reflect.DeepEqual(v, w) {
			out[f] = true
		}
	}
	for f := range b {
		if _, ok := a[f]; !ok {
			out[f] = true
		}
	}
	return out
}

func distinctChains(cs []nfevents.Change) int {
	seen := map[string]bool{}
	for _, c := range cs {
		seen[c.Name] = true
	}
	return len(seen)
}

// firstMatch returns the chain name of the n-th rule line with prefix.
func firstMatch(t *testing.T, rules []byte, prefix string, n int) string {
	t.Helper()
	for _, l := range bytes.Split(rules, []byte("\n")) {
		if bytes.HasPrefix(l, []byte(prefix)) {
			n--
			if n == 0 {
				return strings.Fields(string(l))[1]
			}
		}
	}
	t.Fatalf("no rule %q", prefix)
	return ""
}

func currentGen(t *testing.T, ns string) uint32 {
	t.Helper()
	var gen uint32
	c, err := dialNFT(ns)
	if err == nil {
		gen, err = getGen(c)
		c.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return gen
}

// TestNFTReaderUndecodableFallsBack: a rule with a match the decoder does
// not know, in a KUBE-* chain, fails the read with ErrUndecodable and a
// reason naming the rule; in a chain kube-proxy's chains never reach it is
// recorded and the read succeeds; once reached, the read fails.
func TestNFTReaderUndecodableFallsBack(t *testing.T) {
	requireNFT(t, false)
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
			if err := restoreInto(ns, BackendNFT, false, []byte(rules)); err != nil {
				t.Skipf("kernel or iptables lacks the match: %v", err)
			}
			nr := &NFTReader{NetNS: ns}
			obs, err := nr.Snapshot(context.Background(), model.Hints{})
			if !tc.fails {
				if err != nil {
					t.Fatal(err)
				}
				want, _ := Parse(Dumps{IPv4: nftSave(t, ns, false)}, model.Hints{})
				assertSameObserved(t, obs, want)
				return
			}
			if !errors.Is(err, ErrUndecodable) {
				t.Fatalf("want ErrUndecodable, got %v (%d frontends)", err, len(obs.Frontends))
			}
			t.Logf("reason: %v", err)
			if !strings.Contains(err.Error(), "not decoded") {
				t.Errorf("reason does not say what was not decoded: %v", err)
			}
		})
	}
}

// sameRuleText compares, family by family and table by table, the rules a
// save tool printed (d) with the rules a decoder rendered (rendered), and
// fails naming the first rule that differs. saver and decoder name the two
// sides in the message.
func sameRuleText(t *testing.T, d Dumps, v6 bool, saver, decoder string, rendered func(v6 bool) map[string][]string) {
	t.Helper()
	for _, fam := range []bool{false, true} {
		if fam && !v6 {
			continue
		}
		text := d.IPv4
		if fam {
			text = d.IPv6
		}
		want, got := savedRules(text), rendered(fam)
		for _, table := range nlTables {
			w, g := want[table], got[table]
			for i := 0; i < max(len(w), len(g)); i++ {
				var wl, gl string
				if i < len(w) {
					wl = w[i]
				}
				if i < len(g) {
					gl = g[i]
				}
				if wl != gl {
					t.Fatalf("v6=%v %s rule %d:\n%-20s %s\n%-20s %s", fam, table, i, saver+":", wl, decoder+":", gl)
				}
			}
		}
	}
}
