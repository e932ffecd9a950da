//go:build linux

package iptables

import (
	"context"
	"testing"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
)

// TestNFTReaderKeepsItsSocket: polls and event re-reads share one
// nfnetlink socket. Closing one waits for any nf_tables batch in the
// kernel to commit (BenchmarkNFTPollDuringCommit), so a socket per
// operation made every poll during a kube-proxy sync wait for it.
func TestNFTReaderKeepsItsSocket(t *testing.T) {
	requireNFT(t, false)
	ns := restoreFixture(t, "worker-a.iptables-save", "")
	r := &NFTReader{NetNS: ns}
	ctx := context.Background()
	for i := range 3 {
		if _, err := r.Snapshot(ctx, model.Hints{}); err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
	}
	ev := nfevents.Event{Generation: currentGen(t, ns), Changes: []nfevents.Change{{Family: "ip", Table: "nat", Object: "rule", Name: "KUBE-SERVICES"}}}
	if err := r.ApplyEvent(ctx, ev); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if st.ChainReads == 0 {
		t.Fatalf("the event re-read no chain (stats %+v): the test does not exercise an event read", st)
	}
	if st.Dials != 1 {
		t.Fatalf("%d sockets opened for 3 snapshots and an event read, want 1", st.Dials)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Snapshot(ctx, model.Hints{}); err != nil {
		t.Fatal(err)
	}
	if d := r.Stats().Dials; d != 2 {
		t.Fatalf("after Close, a snapshot opened %d sockets in all, want 2", d)
	}
	_ = r.Close()
}
