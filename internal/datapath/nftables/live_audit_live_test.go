package nftables

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// TestAuditDeferredDuringCommits: an audit read (RequestAudit, the agent's
// full audit) that commits keep unstable leaves the cache in use: the
// Snapshot returns the cached frontends without the "kept changing"
// warning, the deferral is counted, and a Resync-style drop never happens.
// The audit makes one read attempt, and asked again at once it waits for
// its backoff (nfevents.AuditBackoff) instead of reading.
// (Dropping it made every change event a full read for as long as commits
// kept that read unstable: at 100k endpoints under churn, a core.)
func TestAuditDeferredDuringCommits(t *testing.T) {
	ns := nftGen10kNetns(t)
	ctx := context.Background()
	r := &Reader{Config: Config{NetNS: ns, Retries: 1}}
	defer r.Close()
	if _, err := r.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	// Quiet, an audit reads and replaces the cache.
	reads, perRead := r.fullReads, r.kernelReads
	if !r.RequestAudit() {
		t.Fatal("RequestAudit: nothing cached after a quiet read")
	}
	if _, err := r.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if a, d := r.Audits(); a != 1 || d != 0 || r.fullReads != reads+1 {
		t.Fatalf("quiet audit: %d audits, %d deferred, %d reads; want 1, 0, 1", a, d, r.fullReads-reads)
	}
	for try := 1; ; try++ {
		before, err := r.Snapshot(ctx) // quiet: cached
		if err != nil {
			t.Fatal(err)
		}
		want := maps.Clone(before.Frontends)
		a0, d0 := r.Audits()
		k0 := r.kernelReads
		if !r.RequestAudit() {
			t.Fatal("RequestAudit: nothing cached after a quiet read")
		}
		// Commits from 3 ms on: the audit begins on the cache's generation,
		// and its attempts run while the generation moves.
		commits := netnstest.StartCommitsWith(t, ns, netnstest.CommitsOptions{Netlink: true, Pause: 500 * time.Microsecond, Delay: 3 * time.Millisecond})
		got, err := r.Snapshot(ctx)
		n := commits.Stop()
		a, d := r.Audits()
		t.Logf("audit during %d commits: %d audits, %d deferred, err %v", n, a-a0, d-d0, err)
		if err != nil {
			t.Fatalf("an audit during commits failed the read: %v", err)
		}
		if d == d0 {
			// The machine stalled: the audit completed between commits, or
			// the commits began before it (a plain read). Retry.
			if try == 5 {
				t.Skipf("the audit was not disturbed throughout %d times: the deferral was not reached", try)
			}
			continue
		}
		if a != a0 {
			t.Errorf("a deferred audit counted as done")
		}
		if slices.Contains(got.Warnings, nftUnstableWarning) || !reflect.DeepEqual(got.Frontends, want) {
			t.Errorf("deferred audit: %d frontends (cached %d), warnings %q", len(got.Frontends), len(want), got.Warnings)
		}
		if r.cache == nil {
			t.Error("a deferred audit dropped the cache")
		}
		// One attempt, not the retries of a plain read (Retries 1 here):
		// under sustained commits each retry is another spoiled full read.
		// A read cut short by the commit makes fewer requests, never more.
		if k := r.kernelReads - k0; k > perRead+2 {
			t.Errorf("deferred audit made %d kernel requests: more than one attempt (a read is %d, plus the generation checks)", k, perRead)
		}
		// Put off: once the cache caught up with the commits (a plain read,
		// the generation moved), asking again reads nothing until the
		// backoff ends.
		if _, err := r.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		k1, f1 := r.kernelReads, r.fullReads
		r.RequestAudit()
		if _, err := r.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		if r.fullReads != f1 || r.kernelReads-k1 > 2 {
			t.Errorf("an audit asked for within its backoff ran: %d full reads, %d kernel requests", r.fullReads-f1, r.kernelReads-k1)
		}
		return
	}
}

// nftGen10kNetns is a new network namespace holding the generated 10k
// ruleset (nftGen10k), skipping when the kernel cannot.
func nftGen10kNetns(t *testing.T) string {
	t.Helper()
	ns := nftTestNetns(t)
	nftRequireKernel(t, ns)
	path := filepath.Join(t.TempDir(), "gen.nft")
	if err := os.WriteFile(path, []byte(nftGen10k.text()), 0o644); err != nil {
		t.Fatal(err)
	}
	nftIn(t, ns, "nft", "-f", path)
	return ns
}
