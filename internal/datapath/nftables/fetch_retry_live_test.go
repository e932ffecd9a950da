package nftables

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// nftUnstableWarning is the warning of a read whose every attempt saw the
// generation move (fullLocked).
const nftUnstableWarning = "the ruleset kept changing during the read; it may mix generations"

// nftRequireKernel skips unless nft runs and the kernel takes nf_tables
// commits in ns.
func nftRequireKernel(t *testing.T, ns string) {
	t.Helper()
	for _, op := range []string{"add", "delete"} {
		if out, err := netnstest.Cmd(ns, "nft", op, "table", "ip", "nd-probe").CombinedOutput(); err != nil {
			t.Skipf("no nf_tables (nft or the kernel's): nft %s table: %v: %s", op, err, out)
		}
	}
}

// TestSnapshotCommitsThroughout: commits land all through the reader's full
// read (a table of its own is created and deleted over netlink, a fraction
// of a millisecond apart, from before the read starts until it has
// returned), so the generation moves under every attempt: the first and its
// one retry (Config.Retries 1). The read returns the last attempt's tables with the
// "kept changing" warning, caches nothing, and once the commits stop the
// next Snapshot reads again: no warning, cached from then on.
func TestSnapshotCommitsThroughout(t *testing.T) {
	ns := nftGen10kNetns(t)
	quiet := &Reader{Config: Config{NetNS: ns}}
	defer quiet.Close()
	want, err := quiet.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Frontends) == 0 || slices.Contains(want.Warnings, nftUnstableWarning) {
		t.Fatalf("quiet read: %d frontends, warnings %q", len(want.Frontends), want.Warnings)
	}
	perRead := quiet.kernelReads
	// The shortest a complete attempt takes: the faster of two quiet reads.
	quiet.Resync()
	t0 := time.Now()
	if _, err := quiet.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	minRead := time.Since(t0)

	const retries = 1
	var (
		nr  *Reader
		got model.Observed
	)
	// On a loaded machine the commit loop can stall for longer than an
	// attempt: a read that then comes out stable proves nothing, so it is
	// run again (a few times) on a new reader.
	for try := 1; ; try++ {
		nr = &Reader{Config: Config{NetNS: ns, Retries: retries}}
		defer nr.Close()
		commits := netnstest.StartCommitsWith(t, ns, netnstest.CommitsOptions{Netlink: true, Pause: 500 * time.Microsecond})
		for deadline := time.Now().Add(10 * time.Second); commits.Count() < 3; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("commit loop: %d commits in 10 s", commits.Count())
			}
		}
		start := time.Now()
		got, err = nr.Snapshot(context.Background())
		end := time.Now()
		n := commits.Stop()
		gap := commits.MaxQuiet(start, end)
		if err != nil {
			t.Fatalf("read during %d commits: %v", n, err)
		}
		t.Logf("read %v during %d commits (longest stretch that may hold none %v; a quiet read %v): %d kernel requests (a read's %d), warnings %q",
			end.Sub(start), n, gap, minRead, nr.kernelReads, perRead, got.Warnings)
		if slices.Contains(got.Warnings, nftUnstableWarning) {
			break
		}
		if gap < minRead/2 {
			t.Fatalf("warnings %q: want %q, every attempt ran during commits (none lasts %v without one)", got.Warnings, nftUnstableWarning, gap)
		}
		if try == 3 {
			t.Skipf("the commit loop left %v without a commit (a read takes about %v), %d times: an attempt may have run undisturbed", gap, minRead, try)
		}
	}
	if rest := slices.DeleteFunc(slices.Clone(got.Warnings), func(w string) bool { return w == nftUnstableWarning }); !slices.Equal(rest, want.Warnings) ||
		len(got.Warnings) != len(want.Warnings)+1 {
		t.Errorf("warnings %q: want the quiet read's %q and one %q", got.Warnings, want.Warnings, nftUnstableWarning)
	}
	if !reflect.DeepEqual(got.Frontends, want.Frontends) {
		t.Errorf("read during commits: %d frontends, a quiet read's %d, verdicts differ", len(got.Frontends), len(want.Frontends))
	}
	// Every attempt read everything (only another table changed), and one
	// full read ran: Retries attempts after the first, no more.
	if nr.fullReads != 1 || nr.kernelReads != (retries+1)*perRead {
		t.Errorf("%d full reads, %d kernel requests: want 1 read of %d attempts, %d requests", nr.fullReads, nr.kernelReads, retries+1, (retries+1)*perRead)
	}
	// Not cached: nothing to serve again, nothing to freeze, no version.
	if _, ok := nr.Frozen(); ok || nr.cache != nil || got.Version != 0 {
		t.Errorf("unstable read kept: frozen %v, cached %v, version %d", ok, nr.cache != nil, got.Version)
	}

	// Quiet again: the next Snapshot reads again rather than serve the
	// mixed read, and that read is stable, so it is cached.
	again, err := nr.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("read after the commits: %v", err)
	}
	if slices.Contains(again.Warnings, nftUnstableWarning) || !slices.Equal(again.Warnings, want.Warnings) {
		t.Errorf("read after the commits: warnings %q, want the quiet read's %q", again.Warnings, want.Warnings)
	}
	if !reflect.DeepEqual(again.Frontends, want.Frontends) {
		t.Errorf("read after the commits: %d frontends, a quiet read's %d, verdicts differ", len(again.Frontends), len(want.Frontends))
	}
	if nr.fullReads != 2 || nr.kernelReads != (retries+2)*perRead {
		t.Errorf("read after the commits: %d full reads, %d kernel requests; want 2, %d (one more attempt)", nr.fullReads, nr.kernelReads, (retries+2)*perRead)
	}
	if f, ok := nr.Frozen(); !ok || again.Version == 0 || f.Version != again.Version {
		t.Errorf("read after the commits not cached: frozen %v (version %d), version %d", ok, f.Version, again.Version)
	}
	last, err := nr.Snapshot(context.Background())
	if err != nil || nr.fullReads != 2 || last.Version != again.Version || len(last.Warnings) != len(want.Warnings) {
		t.Errorf("read once cached: err %v, %d full reads (want 2), version %d (want %d), warnings %q",
			err, nr.fullReads, last.Version, again.Version, last.Warnings)
	}
}
