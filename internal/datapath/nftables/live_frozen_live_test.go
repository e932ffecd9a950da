package nftables

import (
	"context"
	"maps"
	"reflect"
	"testing"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// TestNFTInPlaceFrozenAndChangedSince: endpoint changes update the cached
// frontends in place; a Frozen copy taken before them does not move; the
// next Snapshot names every frontend changed since the last one (two
// events: the union), relative to that Snapshot's version, and equals a
// full read; a copy taken after them has the new content.
func TestNFTInPlaceFrozenAndChangedSince(t *testing.T) {
	ns, r, w := nftOpsFixture(t, 0)
	ctx := context.Background()
	s0, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f0, ok := r.Frozen()
	if !ok || f0.Version != s0.Version {
		t.Fatalf("Frozen: ok %v version %d, want the snapshot's %d", ok, f0.Version, s0.Version)
	}
	before := maps.Clone(s0.Frontends)
	apply := func(script string) {
		netnstest.RunInput(t, ns, script, "nft", "-f", "-")
		ev := nftWaitEvent(t, w, func(ev nfevents.Event) bool { return ev.TouchesTable("ip", nftTableName) })
		if _, err := r.Update(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	svcs := nftGenSmall.list()
	const kp = "ip kube-proxy "
	s3, s5 := svcs[3], svcs[5]
	for _, s := range []nftGenService{s3, s5} {
		apply("flush chain " + kp + s.chain("service-") + "\nadd rule " + kp + s.chain("service-") +
			" meta l4proto tcp dnat to 10.250.7.7:8080\n")
	}
	if reflect.DeepEqual(before, s0.Frontends) {
		t.Fatal("two endpoint changes left the returned frontends as they were: not updated in place (the test's premise)")
	}
	if !reflect.DeepEqual(before, f0.Frontends) {
		t.Fatal("the Frozen copy changed with the cache")
	}
	s1, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Since != s0.Version || s1.Changed == nil {
		t.Fatalf("since %d changed %v: want the changes named since the last snapshot (%d)", s1.Since, s1.Changed, s0.Version)
	}
	for fe := range before {
		differs := !reflect.DeepEqual(before[fe], s1.Frontends[fe])
		if differs && !s1.Changed[fe] {
			t.Errorf("%v changed and is not named", fe)
		}
	}
	nftSameObserved(t, "after two in-place changes", s1, nftLive(t, ns, model.Hints{}))
	f1, _ := r.Frozen()
	if f1.Version != s1.Version || !reflect.DeepEqual(f1.Frontends, s1.Frontends) {
		t.Fatal("a Frozen copy after the changes is not the new state")
	}
	if r.fullReads != 1 {
		t.Errorf("%d full reads, want 1", r.fullReads)
	}
}
