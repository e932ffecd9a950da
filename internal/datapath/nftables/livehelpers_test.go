package nftables

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// nftRequireRoot skips privileged tests when not root.
func nftRequireRoot(t *testing.T) {
	t.Helper()
	netnstest.RequireRoot(t, "creates network namespaces and loads nftables rules in them")
}

// nftTestNetns creates a fresh network namespace, deleted at cleanup.
func nftTestNetns(t *testing.T) string {
	t.Helper()
	nftRequireRoot(t)
	return netnstest.New(t, "nd-dp")
}

// nftIn runs a command inside the namespace and returns its stdout.
func nftIn(t *testing.T, ns string, args ...string) []byte {
	t.Helper()
	return netnstest.Run(t, ns, args...)
}

// nftLoad loads testdata/<file> with nft -f in the namespace.
func nftLoad(t *testing.T, ns, file string) {
	t.Helper()
	nftIn(t, ns, "nft", "-f", fixture.Path(t, file))
}

// nftDump returns `nft -j list table <fam> kube-proxy`, or nil without the table.
func nftDump(t *testing.T, ns, fam string) []byte {
	t.Helper()
	out, err := netnstest.Cmd(ns, "nft", "-j", "list", "table", fam, "kube-proxy").Output()
	if err != nil {
		return nil
	}
	return out
}

func nftLive(t *testing.T, ns string, opts model.Hints) model.Observed {
	t.Helper()
	src := &Reader{Config: Config{NetNS: ns, Hints: opts}}
	o, err := src.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("live snapshot: %v", err)
	}
	return o
}

// nftSameObserved fails unless live and offline reads agree exactly.
func nftSameObserved(t *testing.T, what string, live, offline model.Observed) {
	t.Helper()
	// The live reader numbers its reads and names what an update changed;
	// the content must agree.
	live.Version, offline.Version, live.Since, live.Changed = 0, 0, 0, nil
	if !reflect.DeepEqual(live, offline) {
		t.Errorf("%s: live and offline reads differ:\n%s", what, nftLineDiff(nftRender(offline), nftRender(live)))
	}
}

func nftOffline(t *testing.T, v4, v6 []byte, opts model.Hints) model.Observed {
	t.Helper()
	o, err := ParseJSON(v4, v6, opts)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func nftWaitEvent(t *testing.T, w *nfevents.Watcher, match func(nfevents.Event) bool) nfevents.Event {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("event channel closed: %v", w.Err())
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatal("no matching nftables event within 5s")
		}
	}
}

// nftLiveWatch subscribes to ns's change events for the rest of the test.
func nftLiveWatch(t *testing.T, ns string) (context.Context, *nfevents.Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := nfevents.Watch(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return ctx, w
}

// nftRewriteChain rewrites one service chain to a single backend in one
// transaction, as kube-proxy writes an endpoint change.
func nftRewriteChain(t *testing.T, ns, chain, backend string) {
	t.Helper()
	script := "flush chain ip kube-proxy " + chain + "\nadd rule ip kube-proxy " + chain + " meta l4proto tcp dnat to " + backend + "\n"
	netnstest.RunInput(t, ns, script, "nft", "-f", "-")
}
