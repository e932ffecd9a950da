package bench

import (
	"reflect"
	"testing"

	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nftables"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

var small = Spec{Services: 60, Endpoints: 3, NodePortEvery: 10, EmptyEvery: 50}

// TestGeneratedTablesMatchCluster: the generated iptables and nftables
// tables, read by netdrift's parsers, are exactly what the generated
// cluster state expects (no findings), so the benchmarks measure a
// realistic, drift-free node.
func TestGeneratedTablesMatchCluster(t *testing.T) {
	want := watch.Expected(NodeName, small.ClusterState())
	if len(want.Frontends) < small.Services {
		t.Fatalf("%d desired frontends for %d services", len(want.Frontends), small.Services)
	}
	obs, err := iptables.Parse(iptables.Dumps{IPv4: []byte(small.IPTablesRestore())}, model.HintsFor(want))
	if err != nil {
		t.Fatal(err)
	}
	checkNoDrift(t, "iptables", want, obs)
}

func checkNoDrift(t *testing.T, what string, want model.Desired, obs model.Observed) {
	t.Helper()
	if len(obs.Warnings) != 0 {
		t.Errorf("%s: warnings %q", what, obs.Warnings)
	}
	if f := drift.Compare(want, obs); len(f) != 0 {
		t.Errorf("%s: %d findings, first %+v", what, len(f), f[0])
	}
	if len(obs.Frontends) != len(want.Frontends) {
		t.Errorf("%s: %d observed frontends, %d desired", what, len(obs.Frontends), len(want.Frontends))
	}
}

// TestLoadedTablesMatchCluster loads the generated tables into fresh
// namespaces (iptables-nft, iptables-legacy, nftables) and reads them back
// with netdrift's live sources: still no drift.
func TestLoadedTablesMatchCluster(t *testing.T) {
	want := watch.Expected(NodeName, small.ClusterState())
	for _, backend := range []string{iptables.BackendNFT, iptables.BackendLegacy} {
		ns := loadIPTables(t, small, backend)
		src := &iptables.Reader{Config: iptables.Config{NetNS: ns, Backend: backend}}
		obs, err := src.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		checkNoDrift(t, "iptables-"+backend, want, obs)
	}
	ns := loadNFT(t, small)
	src := &nftables.Reader{Config: nftables.Config{NetNS: ns}}
	obs, err := src.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	checkNoDrift(t, "nftables", want, obs)
}

// loadIPTables restores the spec's iptables tables with one backend into a
// fresh namespace.
func loadIPTables(tb testing.TB, s Spec, backend string) string {
	tb.Helper()
	ns := netns(tb)
	run(tb, ns, s.IPTablesRestore(), "iptables-"+backend+"-restore")
	return ns
}

// loadNFT loads the spec's nftables table into a fresh namespace.
func loadNFT(tb testing.TB, s Spec) string {
	tb.Helper()
	ns := netns(tb)
	run(tb, ns, s.NFTText(), "nft", "-f", "-")
	return ns
}

// TestClusterFileMatchesClusterState: the kubectl-shaped cluster file the
// offline benchmark writes loads to the same desired state as ClusterState.
func TestClusterFileMatchesClusterState(t *testing.T) {
	cs, err := clusterfile.Load(small.ClusterFile(), "cluster.json")
	if err != nil {
		t.Fatal(err)
	}
	want, got := watch.Expected(NodeName, small.ClusterState()), watch.Expected(NodeName, cs)
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("desired state differs: %d frontends from the file, %d from ClusterState", len(got.Frontends), len(want.Frontends))
	}
}
