//go:build linux

package iptables_test

import (
	"context"
	"reflect"
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
	spec := bench.Scale10k // a full read of some 100 ms or more, even without -race
	ns := netnstest.New(t, "nd-nlretry")
	netnstest.RunInput(t, ns, spec.IPTablesRestore(), "iptables-nft-restore")
	hints := model.HintsFor(watch.Expected(bench.NodeName, spec.ClusterState()))
	quiet := &iptables.NFTReader{NetNS: ns}
	want, err := quiet.Snapshot(context.Background(), hints)
	if err != nil {
		t.Fatal(err)
	}

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
