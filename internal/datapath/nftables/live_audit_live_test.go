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
// (Dropping it made every change event a full read for as long as commits
// kept that read unstable: at 100k endpoints under churn, a core.)
func TestAuditDeferredDuringCommits(t *testing.T) {
	ns := nftTestNetns(t)
	nftRequireKernel(t, ns)
	path := filepath.Join(t.TempDir(), "gen.nft")
	if err := os.WriteFile(path, []byte(nftGen10k.text()), 0o644); err != nil {
		t.Fatal(err)
	}
	nftIn(t, ns, "nft", "-f", path)
	ctx := context.Background()
	r := &Reader{Config: Config{NetNS: ns, Retries: 1}}
	defer r.Close()
	if _, err := r.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	// Quiet, an audit reads and replaces the cache.
	reads := r.fullReads
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
		return
	}
}
