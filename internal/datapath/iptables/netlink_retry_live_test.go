//go:build linux

package iptables_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"github.com/netdrift/netdrift/internal/watch"
)

// TestNFTReaderFullReadDuringCommits: commits land while the iptables-nft
// reader's full read runs (another table is created and deleted in a loop
// for the read's first 60 ms, so the ruleset generation moves and dumps are
// interrupted). The read must notice and read again, and what it returns
// must be the tables kube-proxy wrote, the same as a read on a quiet
// namespace.
func TestNFTReaderFullReadDuringCommits(t *testing.T) {
	netnstest.RequireRoot(t, "loads iptables-nft tables into a fresh network namespace")
	// bench.Scale10k: a full read long enough for commits to land in it (see
	// BENCHMARKS.md, Reading)
	ns, hints, _, want := quietRead(t, bench.Scale10k)

	commits := netnstest.StartCommits(t, ns)
	time.Sleep(50 * time.Millisecond) // the loop is committing
	nr := &iptables.NFTReader{NetNS: ns}
	commits.Begin()
	got, err := nr.Snapshot(context.Background(), hints)
	n := commits.Wait()
	if err != nil {
		t.Fatalf("full read during %d commits: %v", n, err)
	}
	st := nr.Stats()
	t.Logf("%d commits; %d full reads, %d attempts dropped", n, st.FullReads, st.ReadRetries)
	if st.ReadRetries < 1 {
		t.Errorf("no attempt dropped (%d full reads) during %d commits: want a second attempt after the generation moved", st.FullReads, n)
	}
	if !reflect.DeepEqual(got.Frontends, want.Frontends) {
		t.Errorf("read during commits: %d frontends, quiet read %d, verdicts differ", len(got.Frontends), len(want.Frontends))
	}
	// Quiet again: the next read brings the reader to the current generation.
	again, err := nr.Snapshot(context.Background(), hints)
	if err != nil || !reflect.DeepEqual(again.Frontends, want.Frontends) {
		t.Errorf("read after the commits: err %v, %d frontends, want %d", err, len(again.Frontends), len(want.Frontends))
	}
}

// quietRead loads spec's iptables-nft tables into a new namespace and reads
// them once with no commit running: the reference a disturbed read must
// match.
func quietRead(t *testing.T, spec bench.Spec) (ns string, hints model.Hints, quiet *iptables.NFTReader, want model.Observed) {
	t.Helper()
	ns = netnstest.New(t, "nd-nlretry")
	netnstest.RunInput(t, ns, spec.IPTablesRestore(), "iptables-nft-restore")
	hints = model.HintsFor(watch.Expected(bench.NodeName, spec.ClusterState()))
	quiet = &iptables.NFTReader{NetNS: ns}
	want, err := quiet.Snapshot(context.Background(), hints)
	if err != nil {
		t.Fatal(err)
	}
	return ns, hints, quiet, want
}

// fullReadAttempts is netlink.go's: a full read tries this many times.
const fullReadAttempts = 5

// TestNFTReaderFullReadCommitsThroughout: commits land all through the
// iptables-nft reader's full read (a table of its own is created and
// deleted over netlink, a fraction of a millisecond apart, from before the
// read starts until it has returned), so every attempt is disturbed and the
// read reaches its final attempt. Two shapes of tables decide how the final attempt is
// disturbed:
//   - interrupted: at 10k endpoints the chain listing and KUBE-SERVICES span
//     many datagrams, a commit marks their dumps interrupted, and the final
//     attempt returns that error;
//   - moved: a small cluster whose every dump fits one datagram (no dump
//     can be interrupted): the generation moves under each attempt and the
//     final one keeps its tables at the generation read before it.
//
// Either way exactly fullReadAttempts-1 attempts are dropped, the result is
// an error naming the interruption or the quiet read's frontends, and once
// the commits stop the reader reads again and catches up.
func TestNFTReaderFullReadCommitsThroughout(t *testing.T) {
	netnstest.RequireRoot(t, "loads iptables-nft tables into fresh network namespaces")
	iptables.RequireBackend(t, "nft", false)
	for _, tc := range []struct {
		name  string
		spec  bench.Spec
		pause time.Duration // between commits
	}{
		{"interrupted", bench.Scale10k, 500 * time.Microsecond},
		{"moved", bench.Spec{Services: 40, Endpoints: 3, NodePortEvery: 10, EmptyEvery: 15}, 100 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) { testFullReadCommitsThroughout(t, tc.spec, tc.pause) })
	}
}

func testFullReadCommitsThroughout(t *testing.T, spec bench.Spec, pause time.Duration) {
	ns, hints, quiet, want := quietRead(t, spec)
	if len(want.Frontends) == 0 {
		t.Fatal("quiet read: no frontends")
	}
	// The shortest a complete attempt takes: the faster of two quiet reads.
	minRead := quiet.Stats().LastReadDur
	quiet.Drop()
	if _, err := quiet.Snapshot(context.Background(), hints); err != nil {
		t.Fatal(err)
	}
	minRead = min(minRead, quiet.Stats().LastReadDur)

	const behindLimit = 50 * time.Millisecond
	var (
		nr  *iptables.NFTReader
		got model.Observed
		st  iptables.NFTStats
		err error
	)
	// On a loaded machine the commit loop can stall for longer than an
	// attempt: a read that then ends early proves nothing, so it is run
	// again (a few times) on a new reader.
	for try := 1; ; try++ {
		nr = &iptables.NFTReader{NetNS: ns, BehindLimit: behindLimit}
		commits := netnstest.StartCommitsWith(t, ns, netnstest.CommitsOptions{Netlink: true, Pause: pause})
		for deadline := time.Now().Add(10 * time.Second); commits.Count() < 3; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("commit loop: %d commits in 10 s", commits.Count())
			}
		}
		start := time.Now()
		got, err = nr.Snapshot(context.Background(), hints)
		end := time.Now()
		n := commits.Stop()
		gap := commits.MaxQuiet(start, end)
		st = nr.Stats()
		t.Logf("read %v during %d commits (longest stretch that may hold none %v; a quiet read %v): %d attempts dropped, %d completed, err %v",
			end.Sub(start), n, gap, minRead, st.ReadRetries, st.FullReads, err)
		// The commit loop may also stall near its end, so that the final
		// attempt runs after the last commit: it then reads the kernel's
		// generation and nothing moved under it. Run again.
		caughtUp := err == nil && iptables.CachedGeneration(nr) == iptables.KernelGeneration(t, ns)
		if st.ReadRetries == fullReadAttempts-1 && !caughtUp {
			break
		}
		if err != nil {
			t.Fatalf("read during commits failed after %d dropped attempts: %v", st.ReadRetries, err)
		}
		if !caughtUp && (st.ReadRetries > fullReadAttempts-1 || gap < minRead/2) {
			t.Fatalf("%d attempts dropped, want %d: every attempt ran during commits (none lasts %v without one)", st.ReadRetries, fullReadAttempts-1, gap)
		}
		if try == 5 {
			t.Skipf("the commit loop left %v without a commit (a complete attempt takes about %v), %d times: an attempt may have run undisturbed", gap, minRead, try)
		}
	}
	if st.FullReads > fullReadAttempts {
		t.Errorf("%d complete attempts counted, at most %d ran", st.FullReads, fullReadAttempts)
	}
	afterCommits := st.FullReads

	if err != nil {
		// The final attempt's dump was interrupted: the error says so and
		// nothing is kept.
		t.Logf("final attempt interrupted: %v", err)
		if !strings.Contains(err.Error(), "interrupted by a commit") {
			t.Errorf("error %q does not name the interrupted dump", err)
		}
		if !iptables.Transient(err) {
			t.Errorf("error %q not reported transient: the reader would give up netlink for minutes", err)
		}
		if len(got.Frontends) != 0 || got.Version != 0 {
			t.Errorf("failed read returned %d frontends, version %d", len(got.Frontends), got.Version)
		}
		if _, ok := nr.Frozen(); ok {
			t.Error("failed read: Frozen still has an observation")
		}
	} else {
		// The final attempt completed while the generation moved: its
		// tables are the same (only another table changed).
		t.Logf("final attempt completed (generation moved), not interrupted")
		if !reflect.DeepEqual(got.Frontends, want.Frontends) {
			t.Errorf("read during commits: %d frontends, quiet read %d, verdicts differ", len(got.Frontends), len(want.Frontends))
		}
		if st.FullReads < 1 {
			t.Errorf("read returned tables but counted %d complete attempts", st.FullReads)
		}
		// It kept the generation from before that attempt: the cache is
		// behind the kernel, and a Snapshot serves it only while the
		// events that would bring it up to date may still come.
		again, err := nr.Snapshot(context.Background(), hints)
		if err != nil || !reflect.DeepEqual(again.Frontends, want.Frontends) {
			t.Fatalf("read after the commits: err %v, %d frontends, want %d", err, len(again.Frontends), len(want.Frontends))
		}
		t.Logf("first Snapshot after the commits: %d complete attempts more", nr.Stats().FullReads-afterCommits)
		time.Sleep(behindLimit + 10*time.Millisecond)
	}

	// Quiet again: the reader reads everything once more (no event came)...
	again, err := nr.Snapshot(context.Background(), hints)
	if err != nil || !reflect.DeepEqual(again.Frontends, want.Frontends) {
		t.Fatalf("read after the commits: err %v, %d frontends, want %d", err, len(again.Frontends), len(want.Frontends))
	}
	st2 := nr.Stats()
	if st2.FullReads != afterCommits+1 || st2.ReadRetries != st.ReadRetries {
		t.Errorf("read after the commits: %d complete reads, %d attempts dropped; want %d, %d (one undisturbed full read)",
			st2.FullReads, st2.ReadRetries, afterCommits+1, st.ReadRetries)
	}
	// ...which is at the kernel's generation: the next Snapshot reads nothing.
	last, err := nr.Snapshot(context.Background(), hints)
	if err != nil || !reflect.DeepEqual(last.Frontends, want.Frontends) || last.Version != again.Version {
		t.Errorf("read once caught up: err %v, %d frontends (want %d), version %d (want %d)",
			err, len(last.Frontends), len(want.Frontends), last.Version, again.Version)
	}
	if st3 := nr.Stats(); st3.FullReads != st2.FullReads {
		t.Errorf("read once caught up: %d complete reads, want %d (no read)", st3.FullReads, st2.FullReads)
	}
}
