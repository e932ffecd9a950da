//go:build linux

package iptables_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"github.com/netdrift/netdrift/internal/watch"
)

// opsRig is a namespace with kube-proxy-shaped tables, a change watcher
// carrying the iptables-nft tables' rule messages, and a reader fed its
// events.
type opsRig struct {
	t     *testing.T
	ns    string
	spec  bench.Spec
	hints model.Hints
	w     *nfevents.Watcher
	nr    *iptables.NFTReader
	noOps bool           // hand events on without their rule messages (a reader fallen behind)
	mode  *iptables.Mode // when set, the reader under test (comeAndGo)
}

var opsSpec = bench.Spec{Services: 12, Endpoints: 3, NodePortEvery: 4, EmptyEvery: 5}

func newOpsRig(t *testing.T) *opsRig {
	t.Helper()
	return newOpsRigWith(t, opsSpec)
}

// newOpsRigWith is newOpsRig with the tables and hints of spec.
func newOpsRigWith(t *testing.T, spec bench.Spec) *opsRig {
	t.Helper()
	iptables.RequireBackend(t, iptables.BackendNFT, false)
	r := &opsRig{t: t, ns: iptables.NewTestNetns(t), spec: spec}
	r.hints = model.HintsFor(watch.Expected(bench.NodeName, r.spec.ClusterState()))
	r.restore(r.spec.IPTablesRestore())
	r.w = watchIPTables(t, r.ns)
	r.nr = &iptables.NFTReader{NetNS: r.ns, AuditEvery: -1}
	if _, err := r.nr.Snapshot(context.Background(), r.hints); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *opsRig) restore(in string) {
	r.t.Helper()
	netnstest.RunInput(r.t, r.ns, in, "iptables-nft-restore", "--noflush")
}

// apply hands the reader every event up to the kernel's current
// generation (iptables-nft-restore commits each table on its own) and sums
// the per-event stats.
func (r *opsRig) apply() iptables.NFTStats {
	r.t.Helper()
	var sum iptables.NFTStats
	untilCurrent(r.t, r.ns, r.w, func(ev nfevents.Event) {
		if r.noOps {
			ev.Ops, ev.OpsComplete = nil, false
		}
		if err := r.nr.ApplyEvent(context.Background(), ev); err != nil {
			r.t.Fatal(err)
		}
		st := r.nr.Stats()
		sum.LastChains += st.LastChains
		sum.LastPatched += st.LastPatched
		sum.LastSame += st.LastSame
		sum.LastDecoded += st.LastDecoded
		sum.LastGroups += st.LastGroups
		sum.LastChanged += st.LastChanged
		sum.FullReads, sum.PatchFallbacks = st.FullReads, st.PatchFallbacks
	})
	return sum
}

// watchIPTables watches ns's nf_tables changes with the rule messages of
// the IPv4 iptables-nft tables, until the test ends.
func watchIPTables(tb testing.TB, ns string) *nfevents.Watcher {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	w, err := nfevents.WatchWith(ctx, ns, nfevents.Options{OpTables: []nfevents.TableRef{
		{Family: "ip", Table: "nat"}, {Family: "ip", Table: "filter"}}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.Close() })
	return w
}

// untilCurrent hands fn each event of w up to the generation ns's kernel
// is at now.
func untilCurrent(tb testing.TB, ns string, w *nfevents.Watcher, fn func(nfevents.Event)) {
	tb.Helper()
	gen, err := nfevents.Generation(ns)
	if err != nil {
		tb.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-w.Events():
			g := ev.Generation
			fn(ev)
			if int32(g-gen) >= 0 {
				return
			}
		case <-timeout:
			tb.Fatalf("no event for generation %d", gen)
		}
	}
}

// step restores in, applies its events and checks the result against a
// fresh full read; it returns the events' stats, summed.
func (r *opsRig) step(what, in string) iptables.NFTStats {
	r.t.Helper()
	if in != "" {
		r.restore(in)
	}
	st := r.apply()
	r.sameAsFresh(what)
	return st
}

// syncText is a restore text as kube-proxy's sync writes it: no rules in
// the built-in chains (it adds its jumps there once, not on every sync).
func syncText(in string) string {
	var out []string
	for _, l := range strings.Split(in, "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && f[0] == "-A" && !strings.HasPrefix(f[1], "KUBE-") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// sameAsFresh: the patched reader holds what a fresh full read gives, rule
// by rule, and observes the same.
func (r *opsRig) sameAsFresh(what string) {
	r.t.Helper()
	got, err := r.nr.Snapshot(context.Background(), r.hints)
	if err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
	fresh := &iptables.NFTReader{NetNS: r.ns}
	want, err := fresh.Snapshot(context.Background(), r.hints)
	if err != nil {
		r.t.Fatal(err)
	}
	if held := iptables.CacheHeld(r.nr); held != "" {
		r.t.Errorf("%s: the patched cache keeps what the kernel no longer holds:\n%s", what, held)
	}
	if !iptables.SameCachedTables(r.nr, fresh) {
		r.t.Errorf("%s: the patched tables differ from a fresh read:\n%s", what, iptables.CachedTablesDiff(r.nr, fresh))
	}
	if !reflect.DeepEqual(got.Frontends, want.Frontends) || !reflect.DeepEqual(got.Warnings, want.Warnings) {
		r.t.Errorf("%s: observed state differs from a fresh read:\ngot  %v\nwant %v", what, got.Frontends, want.Frontends)
	}
}

// firstEndpoint is a service with endpoints: its KUBE-SEP chain, DNAT
// target and how many frontends it has.
func firstEndpoint(t *testing.T, s bench.Spec) (sep, dest string, fronts int) {
	t.Helper()
	for _, v := range s.List() {
		if len(v.Endpoints) > 0 {
			fronts = 1
			if v.NodePort != 0 {
				fronts = 2
			}
			return "KUBE-SEP-" + iptables.EndpointChainHash(v.Port, v.Endpoints[0].String()), v.Endpoints[0].String(), fronts
		}
	}
	t.Fatal("no endpoints")
	return "", "", 0
}

// TestNFTPatchFlushReAdd: kube-proxy's full sync (every chain flushed and
// its rules added again) of unchanged rules is patched from the messages:
// no chain read, no rule decoded, no frontend resolved again; the same sync
// with one endpoint moved decodes and resolves only what that touches.
func TestNFTPatchFlushReAdd(t *testing.T) {
	r := newOpsRig(t)
	v0 := r.nr.Stats()
	st := r.step("identical sync", syncText(r.spec.IPTablesRestore()))
	if st.LastChains != 0 || st.PatchFallbacks != 0 || st.LastPatched < 10 || st.LastSame != st.LastPatched ||
		st.LastDecoded != 0 || st.LastGroups != 0 || st.LastChanged != 0 || st.FullReads != v0.FullReads {
		t.Errorf("identical sync: stats %+v", st)
	}
	sep, dest, fronts := firstEndpoint(t, r.spec)
	moved := strings.Replace(syncText(r.spec.IPTablesRestore()), "--to-destination "+dest, "--to-destination 10.255.0.1:8080", 1)
	st = r.step("one endpoint moved", moved)
	if st.LastChains != 0 || st.PatchFallbacks != 0 || st.LastPatched != st.LastSame+1 || st.LastDecoded != 1 ||
		st.LastGroups == 0 || st.LastGroups > fronts || st.LastChanged != fronts {
		t.Errorf("one endpoint moved (%s): stats %+v", sep, st)
	}
}

// TestNFTPatchReplaceInsertDelete: single-rule commands (iptables -R, -I,
// -D, -A) are placed where the kernel put them, without a chain read.
func TestNFTPatchReplaceInsertDelete(t *testing.T) {
	r := newOpsRig(t)
	ipt := func(args ...string) string {
		netnstest.Run(t, r.ns, append([]string{"iptables-nft", "-t", "nat"}, args...)...)
		return strings.Join(args, " ")
	}
	for _, args := range [][]string{
		{"-R", "KUBE-SERVICES", "1", "-d", "10.96.0.200/32", "-p", "tcp", "-m", "tcp", "--dport", "81", "-j", "KUBE-NODEPORTS"},
		{"-R", "KUBE-SERVICES", "3", "-d", "10.96.0.201/32", "-p", "tcp", "-m", "tcp", "--dport", "82", "-j", "KUBE-NODEPORTS"},
		{"-I", "KUBE-SERVICES", "2", "-d", "10.96.0.202/32", "-p", "tcp", "-m", "tcp", "--dport", "83", "-j", "KUBE-NODEPORTS"},
		{"-I", "KUBE-SERVICES", "-d", "10.96.0.203/32", "-p", "tcp", "-m", "tcp", "--dport", "84", "-j", "KUBE-NODEPORTS"},
		{"-D", "KUBE-SERVICES", "4"},
		{"-A", "KUBE-POSTROUTING", "-j", "RETURN"},
	} {
		what := ipt(args...)
		st := r.step(what, "")
		if st.LastChains != 0 || st.LastPatched != 1 {
			t.Errorf("%s: stats %+v", what, st)
		}
	}
	// Two rules inserted at the head in one transaction: the first one's
	// position names the second, not notified yet: the chain is read.
	fb := r.nr.Stats().PatchFallbacks
	r.restore("*nat\n-I KUBE-POSTROUTING -j RETURN\n-I KUBE-POSTROUTING -s 10.1.0.0/16 -j RETURN\nCOMMIT\n")
	if st := r.apply(); st.LastChains != 1 || st.PatchFallbacks != fb+1 {
		t.Errorf("two inserts at the head: stats %+v", st)
	}
	r.sameAsFresh("two inserts at the head")
	// The last rule replaced: the kernel keeps its handle, no position.
	n := strings.Count(string(netnstest.Run(t, r.ns, "iptables-nft", "-t", "nat", "-S", "KUBE-SERVICES")), "-A KUBE-SERVICES")
	what := ipt("-R", "KUBE-SERVICES", strconv.Itoa(n), "-m", "addrtype", "--dst-type", "LOCAL", "-j", "KUBE-NODEPORTS")
	if st := r.step(what, ""); st.LastChains != 0 || st.LastPatched != 1 {
		t.Errorf("%s: stats %+v", what, st)
	}
}

// TestNFTPatchChainDeleted: a service removed (its rules dropped from the
// entry chains, its chains flushed and deleted) is patched: the chains are
// gone, its frontend with them. A renamed chain reads the table again.
func TestNFTPatchChainDeleted(t *testing.T) {
	r := newOpsRig(t)
	var gone bench.Service
	for _, v := range r.spec.List() {
		if len(v.Endpoints) > 0 && v.NodePort == 0 {
			gone = v
			break
		}
	}
	// kube-proxy's sync without the service: its rules left out, its
	// chains declared (flushed) and deleted in the same transaction.
	chains := []string{"KUBE-SVC-" + iptables.ChainHash(gone.Port)}
	for _, ep := range gone.Endpoints {
		chains = append(chains, "KUBE-SEP-"+iptables.EndpointChainHash(gone.Port, ep.String()))
	}
	var keep []string
	for _, l := range strings.Split(syncText(r.spec.IPTablesRestore()), "\n") {
		if !strings.Contains(l, chains[0]) && !slices.ContainsFunc(chains[1:], func(c string) bool { return strings.Contains(l, c) }) {
			keep = append(keep, l)
		}
	}
	text := strings.Join(keep, "\n")
	var del strings.Builder
	for _, c := range chains {
		del.WriteString(":" + c + " - [0:0]\n-X " + c + "\n")
	}
	i := strings.LastIndex(text, "COMMIT")
	sync := text[:i] + del.String() + text[i:]
	st := r.step("service removed", sync)
	if st.LastChains != 0 || st.PatchFallbacks != 0 {
		t.Errorf("service removed: stats %+v", st)
	}
	obs, _ := r.nr.Snapshot(context.Background(), r.hints)
	for f := range obs.Frontends {
		if f.IP == gone.ClusterIP {
			t.Errorf("frontend %s of the removed service still observed", f)
		}
	}
	netnstest.Run(t, r.ns, "iptables-nft", "-t", "nat", "-E", "KUBE-POSTROUTING", "KUBE-POSTROUTING2")
	if st := r.step("chain renamed", ""); st.PatchFallbacks != 1 {
		t.Errorf("rename: want a table read, stats %+v", st)
	}
}

// TestNFTPatchLostAndIncomplete: an event without its rule messages
// (incomplete) reads the chains it names; events mixed with a lost one drop
// the cache, and the next Snapshot reads everything.
func TestNFTPatchLostAndIncomplete(t *testing.T) {
	r := newOpsRig(t)
	sep, dest, _ := firstEndpoint(t, r.spec)
	move := func(to string) {
		r.restore(fmt.Sprintf("*nat\n:%s - [0:0]\n-A %s -p tcp -m tcp -j DNAT --to-destination %s\nCOMMIT\n", sep, sep, to))
	}
	move("10.255.0.1:8080")
	ev := <-r.w.Events()
	ev.Ops, ev.OpsComplete = nil, false
	if err := r.nr.ApplyEvent(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if st := r.nr.Stats(); st.LastChains != 1 || st.LastPatched != 0 {
		t.Errorf("incomplete ops: want the chain read, stats %+v", st)
	}
	r.sameAsFresh("incomplete ops")
	full := r.nr.Stats().FullReads
	move("10.255.0.2:8080")
	move(dest)
	move("10.255.0.3:8080")
	evs := []nfevents.Event{<-r.w.Events(), <-r.w.Events(), <-r.w.Events()}
	evs[1].Lost = true // the one before it was lost
	for _, ev := range evs {
		if err := r.nr.ApplyEvent(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	r.sameAsFresh("after a lost event")
	if st := r.nr.Stats(); st.FullReads != full+1 {
		t.Errorf("lost event: want one full read, stats %+v", st)
	}
}

// TestNFTPatchSeriesMatchesFullRead: after a series of real
// iptables-nft-restore transactions (syncs adding, changing and removing
// services, single-rule commands), the message-patched tables equal a
// fresh full read after every step, the observed state equals
// iptables-nft-save's, and an audit read finds no difference.
func TestNFTPatchSeriesMatchesFullRead(t *testing.T) {
	r := newOpsRig(t)
	bigger := bench.Spec{Services: 16, Endpoints: 2, NodePortEvery: 3, EmptyEvery: 4}
	for i, in := range []string{
		syncText(bigger.IPTablesRestore()), // services added, endpoints removed
		syncText(opsSpec.IPTablesRestore()),
		syncText(strings.ReplaceAll(opsSpec.IPTablesRestore(), "--dport 80", "--dport 8080")),
		"*filter\n:KUBE-SERVICES - [0:0]\n:KUBE-FIREWALL-X - [0:0]\n-A KUBE-FIREWALL-X -j DROP\nCOMMIT\n",
		"*filter\n:KUBE-FIREWALL-X - [0:0]\n-X KUBE-FIREWALL-X\nCOMMIT\n",
		syncText(opsSpec.IPTablesRestore()),
	} {
		r.step(fmt.Sprintf("restore %d", i), in)
	}
	for _, args := range [][]string{
		{"-I", "KUBE-NODEPORTS", "-p", "tcp", "-m", "tcp", "--dport", "31999", "-j", "KUBE-MARK-MASQ"},
		{"-A", "KUBE-NODEPORTS", "-p", "udp", "-m", "udp", "--dport", "31998", "-j", "RETURN"},
		{"-D", "KUBE-NODEPORTS", "1"},
		{"-F", "KUBE-NODEPORTS"},
	} {
		netnstest.Run(t, r.ns, append([]string{"iptables-nft", "-t", "nat"}, args...)...)
		r.step(strings.Join(args, " "), "")
	}
	st := r.nr.Stats()
	if st.PatchedChains == 0 || st.ChainReads != 0 || st.FullReads != 1 {
		t.Errorf("series: want every change patched, stats %+v", st)
	}
	saved := iptables.Dumps{IPv4: netnstest.Run(t, r.ns, "iptables-nft-save")}
	want, err := iptables.Parse(saved, r.hints)
	if err != nil {
		t.Fatal(err)
	}
	r.nr.AuditEvery = time.Nanosecond
	got, err := r.nr.Snapshot(context.Background(), r.hints)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Frontends, want.Frontends) || !reflect.DeepEqual(got.Warnings, want.Warnings) {
		t.Errorf("patched state differs from iptables-nft-save's:\ngot  %v\nwant %v", got.Frontends, want.Frontends)
	}
	if st := r.nr.Stats(); st.Audits != 1 || st.AuditDiffs != 0 || st.FullReads != 2 {
		t.Errorf("audit: stats %+v", st)
	}
}

// TestNFTInPlaceFrozen: an event changes the frontends the last Snapshot
// returned in place; a Frozen copy taken before it does not move; the next
// Snapshot names every frontend that changed since that one and equals a
// fresh read; a copy taken after it has the new content in a map of its own.
func TestNFTInPlaceFrozen(t *testing.T) {
	r := newOpsRig(t)
	ctx := context.Background()
	s0, err := r.nr.Snapshot(ctx, r.hints)
	if err != nil {
		t.Fatal(err)
	}
	f0, ok := r.nr.Frozen()
	if !ok || f0.Version != s0.Version {
		t.Fatalf("Frozen: ok %v version %d, want the snapshot's %d", ok, f0.Version, s0.Version)
	}
	before := maps.Clone(s0.Frontends)
	_, dest, _ := firstEndpoint(t, r.spec)
	r.restore(strings.Replace(syncText(r.spec.IPTablesRestore()), "--to-destination "+dest, "--to-destination 10.255.0.1:8080", 1))
	r.apply()
	if reflect.DeepEqual(before, s0.Frontends) {
		t.Fatal("an endpoint move left the returned frontends as they were: not changed in place (the test's premise)")
	}
	if !reflect.DeepEqual(before, f0.Frontends) {
		t.Fatal("the Frozen copy changed with the cache")
	}
	s1, err := r.nr.Snapshot(ctx, r.hints)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Since != s0.Version || len(s1.Changed) == 0 {
		t.Fatalf("since %d, %d changed: want the changes named since the last snapshot (%d)", s1.Since, len(s1.Changed), s0.Version)
	}
	for fe, v := range before {
		if !reflect.DeepEqual(v, s1.Frontends[fe]) && !s1.Changed[fe] {
			t.Errorf("%v changed and is not named", fe)
		}
	}
	r.sameAsFresh("after an in-place change")
	f1, _ := r.nr.Frozen()
	if f1.Version != s1.Version || !reflect.DeepEqual(f1.Frontends, s1.Frontends) {
		t.Fatal("a Frozen copy after the change is not the new state")
	}
	for fe := range f1.Frontends {
		delete(f1.Frontends, fe) // a map of its own: the cache keeps its frontends
		break
	}
	if len(f1.Frontends) == len(s1.Frontends) {
		t.Fatal("the Frozen copy shares its map with the cache")
	}
}
