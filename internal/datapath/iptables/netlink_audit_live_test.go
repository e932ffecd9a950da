//go:build linux

package iptables_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// TestNFTAuditDeferredDuringCommits: an audit read (patched tables, due)
// whose every attempt a commit interrupts is given up without an error and
// without dropping the patched tables: the Snapshot returns them, the
// deferral is counted, the audit is not tried again at once, and the
// tables still equal a fresh read once the commits stop. (Dropping them
// made the next read a full one, which the same commits interrupt and
// which then falls back to iptables-save: at 100k endpoints, seconds of CPU
// per read for as long as kube-proxy keeps committing.)
// The audit is due either way: AuditEvery after the last full read, or
// asked for by RequestAudit (the agent's full audit).
func TestNFTAuditDeferredDuringCommits(t *testing.T) {
	netnstest.RequireRoot(t, "loads iptables-nft tables into a fresh network namespace")
	for _, requested := range []bool{false, true} {
		name := map[bool]string{false: "interval", true: "requested"}[requested]
		t.Run(name, func(t *testing.T) { testAuditDeferred(t, requested) })
	}
}

func testAuditDeferred(t *testing.T, requested bool) {
	// bench.Scale10k: dumps span many datagrams, so a commit interrupts them.
	r := newOpsRigWith(t, bench.Scale10k)
	ctx := context.Background()
	for try := 1; ; try++ {
		// A single-rule change patched from its messages: an audit is due.
		netnstest.Run(t, r.ns, "iptables-nft", "-t", "nat", "-I", "KUBE-NODEPORTS", "-p", "tcp", "-m", "tcp",
			"--dport", fmt.Sprint(31000+try), "-j", "KUBE-MARK-MASQ")
		if st := r.apply(); st.LastPatched == 0 {
			t.Fatalf("the rule was not patched from its messages: %+v", st)
		}
		before, err := r.nr.Snapshot(ctx, r.hints)
		if err != nil {
			t.Fatal(err)
		}
		want := maps.Clone(before.Frontends)
		st0 := r.nr.Stats()
		if requested {
			if !r.nr.RequestAudit() {
				t.Fatal("RequestAudit: nothing cached")
			}
		} else {
			r.nr.AuditEvery = time.Nanosecond
		}

		// Commits from 3 ms on: the audit begins on the cache's generation,
		// and every attempt runs while the generation moves.
		commits := netnstest.StartCommitsWith(t, r.ns, netnstest.CommitsOptions{Netlink: true, Pause: 500 * time.Microsecond, Delay: 3 * time.Millisecond})
		got, err := r.nr.Snapshot(ctx, r.hints)
		n := commits.Stop()
		st := r.nr.Stats()
		t.Logf("audit during %d commits: %d attempts dropped, %d audits, %d deferred, err %v",
			n, st.ReadRetries-st0.ReadRetries, st.Audits-st0.Audits, st.AuditsDeferred-st0.AuditsDeferred, err)
		if err != nil {
			t.Fatalf("an audit interrupted by commits failed the read: %v", err)
		}
		if st.AuditsDeferred == st0.AuditsDeferred {
			// The machine stalled: the commits began before the audit (no
			// read, the events are awaited), or an attempt completed between
			// them (a plain audit). Patch again and retry.
			if try == 5 {
				t.Skipf("the audit was not disturbed throughout %d times (stats %+v): the deferral was not reached", try, st)
			}
			r.nr.AuditEvery = -1
			r.apply()
			continue
		}
		if !reflect.DeepEqual(got.Frontends, want) {
			t.Errorf("deferred audit: the Snapshot returned %d frontends, the patched tables held %d", len(got.Frontends), len(want))
		}
		if st.Audits != st0.Audits {
			t.Errorf("a deferred audit counted as an audit: %+v", st)
		}
		// The commit loop's generations, then a Snapshot: the deferred audit
		// waits (no full read), and the tables are still the kernel's.
		r.apply()
		full := r.nr.Stats().FullReads
		if _, err := r.nr.Snapshot(ctx, r.hints); err != nil {
			t.Fatal(err)
		}
		if st := r.nr.Stats(); st.FullReads != full || st.AuditsDeferred != st0.AuditsDeferred+1 {
			t.Errorf("right after a deferral the audit was tried again: %+v", st)
		}
		r.nr.AuditEvery = -1
		r.sameAsFresh("after the deferred audit")
		return
	}
}

// TestNFTChainRereadRetriedDuringCommits: a change event whose chain must
// be read again (no rule messages: a reader fallen behind) arrives while
// commits land all through the chain's dump; the reader reads it again
// once they stop instead of failing the event and dropping every cached
// table (at 100k endpoints the full read that followed never completed
// between kube-proxy's commits, and every read fell back to
// iptables-nft-save).
func TestNFTChainRereadRetriedDuringCommits(t *testing.T) {
	netnstest.RequireRoot(t, "loads iptables-nft tables into a fresh network namespace")
	// bench.Scale10k: KUBE-SERVICES' dump spans several datagrams.
	r := newOpsRigWith(t, bench.Scale10k)
	r.noOps = true
	ctx := context.Background()
	for try := 1; ; try++ {
		netnstest.Run(t, r.ns, "iptables-nft", "-t", "nat", "-I", "KUBE-SERVICES", "1", "-d", fmt.Sprintf("10.255.255.%d/32", try),
			"-p", "tcp", "-m", "tcp", "--dport", "9", "-j", "RETURN")
		gen, err := nfevents.Generation(r.ns)
		if err != nil {
			t.Fatal(err)
		}
		var ev nfevents.Event
		for ev = <-r.w.Events(); int32(ev.Generation-gen) < 0; ev = <-r.w.Events() {
		}
		ev.Ops, ev.OpsComplete = nil, false
		st0 := r.nr.Stats()
		// Commits from before the event is applied until 60 ms after: the
		// first attempts are interrupted, the last (10+20+40 ms later) not.
		commits := netnstest.StartCommitsWith(t, r.ns, netnstest.CommitsOptions{Netlink: true, Pause: 500 * time.Microsecond})
		for deadline := time.Now().Add(10 * time.Second); commits.Count() < 3; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("commit loop: %d commits in 10 s", commits.Count())
			}
		}
		commits.Begin()
		err = r.nr.ApplyEvent(ctx, ev)
		n := commits.Wait()
		st := r.nr.Stats()
		t.Logf("re-read during %d commits: %d attempts dropped, %d chains read, err %v", n, st.ReadRetries-st0.ReadRetries, st.ChainReads-st0.ChainReads, err)
		if err != nil {
			t.Fatalf("a chain re-read during commits failed the event: %v", err)
		}
		if st.FullReads != st0.FullReads || st.ChainReads == st0.ChainReads {
			t.Fatalf("want the chain re-read, no full read: %+v", st)
		}
		r.apply() // the commit loop's own table
		if st.ReadRetries == st0.ReadRetries {
			if try == 5 {
				t.Skipf("no commit landed during the chain's dump in %d tries: the retry was not reached", try)
			}
			continue
		}
		r.sameAsFresh("after the re-read during commits")
		return
	}
}
