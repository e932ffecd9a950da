package nftables

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
)

// TestNFTLiveMatchesOffline loads kube-proxy-shaped tables into a fresh
// namespace, reads them over netlink and checks the result equals the offline
// parse of the captured JSON and of a fresh `nft -j` dump.
func TestNFTLiveMatchesOffline(t *testing.T) {
	t.Run("worker-b", func(t *testing.T) {
		ns := nftTestNetns(t)
		nftLoad(t, ns, "worker-b.nft.txt")
		opts := nftOptionsFromCluster(t, fixture.Path(t, "cluster.json"))
		live := nftLive(t, ns, opts)
		if len(live.Frontends) != 125 || len(live.Warnings) != 0 {
			t.Errorf("live: %d frontends, warnings %q; want 125 and none", len(live.Frontends), live.Warnings)
		}
		nftSameObserved(t, "captured fixture", live, nftOffline(t, nftReadTestdata(t, "worker-b.nft.json"), nil, opts))
		nftSameObserved(t, "fresh dump", live, nftOffline(t, nftDump(t, ns, "ip"), nftDump(t, ns, "ip6"), opts))
	})
	t.Run("handwritten", func(t *testing.T) {
		ns := nftTestNetns(t)
		nftLoad(t, ns, "handwritten.v4.nft")
		nftLoad(t, ns, "handwritten.v6.nft")
		for _, opts := range []model.Hints{nftHandwrittenOpts, {}} {
			live := nftLive(t, ns, opts)
			offline := nftOffline(t, nftReadTestdata(t, "handwritten.v4.nft.json"), nftReadTestdata(t, "handwritten.v6.nft.json"), opts)
			nftSameObserved(t, "handwritten", live, offline)
		}
	})
}

// TestNFTLiveSeesMutations changes the loaded table the way a lagging or
// foreign writer would and checks each change is observed.
func TestNFTLiveSeesMutations(t *testing.T) {
	ns := nftTestNetns(t)
	nftLoad(t, ns, "worker-b.nft.txt")
	opts := nftOptionsFromCluster(t, fixture.Path(t, "cluster.json"))
	cart := model.NewFrontend(netip.MustParseAddr("10.97.233.167"), 9090, model.TCP, model.ClusterIP)
	cache := model.NewFrontend(netip.MustParseAddr("10.97.89.70"), 11211, model.TCP, model.ClusterIP)
	before := nftLive(t, ns, opts)
	if _, ok := before.Frontends[cart]; !ok {
		t.Fatalf("%s missing before the change", cart)
	}
	nftIn(t, ns, "nft", "delete", "element", "ip", "kube-proxy", "service-ips", "{ 10.97.233.167 . tcp . 9090 }")
	nftIn(t, ns, "nft", "flush", "chain", "ip", "kube-proxy", "service-OQHAKIQS-shop/cache/tcp/memcache")
	after := nftLive(t, ns, opts)
	if _, ok := after.Frontends[cart]; ok {
		t.Errorf("%s still observed after its map element was deleted", cart)
	}
	if v, ok := after.Frontends[cache]; ok {
		t.Errorf("%s still observed after its chain was flushed: %+v", cache, v)
	}
	if len(after.Frontends) != len(before.Frontends)-2 {
		t.Errorf("%d frontends after the change, want %d", len(after.Frontends), len(before.Frontends)-2)
	}
	if len(after.Warnings) != 1 {
		t.Errorf("want one warning for the flushed chain, got %q", after.Warnings)
	}
	nftSameObserved(t, "after mutation", after, nftOffline(t, nftDump(t, ns, "ip"), nil, opts))
}

func nftLiveWorkerB(t *testing.T) (ns string, opts model.Hints, src *Reader, first model.Observed) {
	t.Helper()
	ns = nftTestNetns(t)
	nftLoad(t, ns, "worker-b.nft.txt")
	opts = nftOptionsFromCluster(t, fixture.Path(t, "cluster.json"))
	src = &Reader{Config: Config{NetNS: ns, Hints: opts}}
	t.Cleanup(func() { src.Close() })
	return ns, opts, src, nftLive1(t, src)
}

// TestNFTLiveIncremental applies change events one by one with Update and
// checks the result equals a full read, and that an unchanged ruleset is
// served from the cache.
func TestNFTLiveIncremental(t *testing.T) {
	ns, opts, src, first := nftLiveWorkerB(t)
	again := nftLive1(t, src)
	if src.fullReads != 1 {
		t.Errorf("%d full reads for two snapshots of an unchanged ruleset, want 1", src.fullReads)
	}
	nftSameObserved(t, "cached snapshot", again, first)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := nfevents.Watch(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// A stale element removed, a chain flushed, a new service added (new
	// chain reachable only through a new element), an endpoint changed.
	nftIn(t, ns, "nft", "delete", "element", "ip", "kube-proxy", "service-ips", "{ 10.97.233.167 . tcp . 9090 }")
	nftIn(t, ns, "nft", "flush", "chain", "ip", "kube-proxy", "service-OQHAKIQS-shop/cache/tcp/memcache")
	nftIn(t, ns, "nft", "add", "chain", "ip", "kube-proxy", "service-NEWNEWNE-shop/new/tcp/http")
	nftIn(t, ns, "nft", "add", "rule", "ip", "kube-proxy", "service-NEWNEWNE-shop/new/tcp/http", "meta", "l4proto", "tcp", "dnat", "to", "10.214.9.9:80")
	nftIn(t, ns, "nft", "add", "element", "ip", "kube-proxy", "service-ips", "{ 10.97.99.99 . tcp . 80 : goto service-NEWNEWNE-shop/new/tcp/http }")
	nftIn(t, ns, "nft", "flush", "chain", "ip", "kube-proxy", "service-EEISWTY7-shop/legacy/tcp/tcp")
	nftIn(t, ns, "nft", "add", "rule", "ip", "kube-proxy", "service-EEISWTY7-shop/legacy/tcp/tcp", "meta", "l4proto", "tcp", "dnat", "to", "10.214.1.72:2525")
	var got model.Observed
	for i := 0; i < 7; i++ {
		ev := nftWaitEvent(t, w, func(ev nfevents.Event) bool { return ev.TouchesTable("ip", "kube-proxy") })
		if got, err = src.Update(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if src.fullReads != 1 {
		t.Errorf("%d full reads, want 1 (updates must be incremental)", src.fullReads)
	}
	nftSameObserved(t, "incremental vs full", got, nftOffline(t, nftDump(t, ns, "ip"), nil, opts))
	legacy := got.Frontends[model.NewFrontend(netip.MustParseAddr("10.97.34.204"), 25, model.TCP, model.ClusterIP)]
	if len(legacy.Backends) != 1 || legacy.Backends[0] != netip.MustParseAddrPort("10.214.1.72:2525") {
		t.Errorf("changed endpoint not seen: %v", legacy.Backends)
	}
	if _, ok := got.Frontends[model.NewFrontend(netip.MustParseAddr("10.97.99.99"), 80, model.TCP, model.ClusterIP)]; !ok {
		t.Error("new service not seen")
	}
}

// TestNFTLiveChainChangeReevaluatesOnlyItsDestinations: an endpoint change
// (kube-proxy rewrites one service chain; no map changes) re-evaluates only
// the destinations that reach that chain, names them, and still equals a
// full read.
func TestNFTLiveChainChangeReevaluatesOnlyItsDestinations(t *testing.T) {
	ns, opts, src, first := nftLiveWorkerB(t)
	_, w := nftLiveWatch(t, ns)
	nftRewriteChain(t, ns, "service-EEISWTY7-shop/legacy/tcp/tcp", "10.214.1.72:2525")
	ev := nftWaitEvent(t, w, func(ev nfevents.Event) bool { return ev.TouchesTable("ip", "kube-proxy") })
	got, err := src.Update(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if got.Changed == nil || got.Since != first.Version || got.Version == first.Version {
		t.Fatalf("a chain change must name what it changed since version %d: since %d version %d changed %v",
			first.Version, got.Since, got.Version, got.Changed)
	}
	if len(got.Changed) == 0 || len(got.Changed) > 4 {
		t.Errorf("changed frontends %v: want the legacy service's few", got.Changed)
	}
	for fe := range got.Changed {
		if v := got.Frontends[fe]; v.Service.Name != "legacy" && first.Frontends[fe].Service.Name != "legacy" {
			t.Errorf("frontend %s of %s named as changed", fe, v.Service)
		}
	}
	nftSameObserved(t, "after a chain change", got, nftOffline(t, nftDump(t, ns, "ip"), nil, opts))
	if src.fullReads != 1 {
		t.Errorf("%d full reads, want 1", src.fullReads)
	}
}

func nftLive1(t *testing.T, src *Reader) model.Observed {
	t.Helper()
	o, err := src.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestNFTLiveUpdateIgnoresOtherTables: an iptables-nft change (another
// table) is applied without reading, and results are independent copies.
func TestNFTLiveUpdateIgnoresOtherTables(t *testing.T) {
	ns := nftTestNetns(t)
	nftLoad(t, ns, "handwritten.v4.nft")
	src := &Reader{Config: Config{NetNS: ns, Hints: nftHandwrittenOpts}}
	first := nftLive1(t, src)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := nfevents.Watch(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	nftIn(t, ns, "nft", "add", "table", "ip", "nat")
	ev := nftWaitEvent(t, w, func(ev nfevents.Event) bool { return ev.TouchesTable("ip", "nat") })
	got, err := src.Update(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if src.fullReads != 1 {
		t.Errorf("%d full reads, want 1", src.fullReads)
	}
	if got.Version == 0 || got.Version != first.Version {
		t.Errorf("a foreign change kept the content but the version moved: %d -> %d (callers would compare again)", first.Version, got.Version)
	}
	nftSameObserved(t, "after a foreign change", got, nftOffline(t, nftReadTestdata(t, "handwritten.v4.nft.json"), nil, nftHandwrittenOpts))
}

// TestNFTLiveSnapshotAwaitsEvents: once change events are applied, a
// Snapshot taken after kube-proxy committed but before the event came
// returns the cache (the event brings the change at the cost of the chains
// it names) instead of reading both tables again; past BehindLimit the
// cache is read again whole.
func TestNFTLiveSnapshotAwaitsEvents(t *testing.T) {
	ns, _, src, first := nftLiveWorkerB(t)
	ctx, w := nftLiveWatch(t, ns)
	rewrite := func(backend string) nfevents.Event {
		nftRewriteChain(t, ns, "service-EEISWTY7-shop/legacy/tcp/tcp", backend)
		return nftWaitEvent(t, w, func(ev nfevents.Event) bool { return ev.TouchesTable("ip", "kube-proxy") })
	}
	if _, err := src.Update(ctx, rewrite("10.214.1.72:2525")); err != nil {
		t.Fatal(err)
	}
	ev := rewrite("10.214.1.73:2525") // delivered, not applied yet
	before, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if src.fullReads != 1 {
		t.Fatalf("%d full reads: a Snapshot trailing the generation by one event read everything", src.fullReads)
	}
	after, err := src.Update(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version == before.Version || after.Version == first.Version {
		t.Fatal("the applied event did not produce a new version")
	}
	src.Config.BehindLimit = time.Nanosecond
	rewrite("10.214.1.74:2525")
	src.Snapshot(ctx) // starts the trailing clock
	time.Sleep(time.Millisecond)
	if _, err := src.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if src.fullReads != 2 {
		t.Errorf("%d full reads: past BehindLimit the trailing cache must be read again", src.fullReads)
	}
	src.Resync() // the agent's full audit
	if _, err := src.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if src.fullReads != 3 {
		t.Errorf("%d full reads: a Snapshot after Resync must read everything", src.fullReads)
	}
}
