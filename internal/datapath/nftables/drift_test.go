//go:build linux

package nftables_test

import (
	"os"
	"slices"
	"testing"

	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/datapath/nftables"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/findingtest"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
	"github.com/netdrift/netdrift/internal/watch"
)

// TestNFTDriftOnFixtures runs the whole offline pipeline on worker-b's real
// kube-proxy nftables dumps: the fixture README's expected answers.
func TestNFTDriftOnFixtures(t *testing.T) {
	for _, tc := range []struct {
		cluster, dump string
		want          []string
	}{
		{"cluster.json", "worker-b.nft.json", nil},
		{"stale.cluster.json", "worker-b.nft.json", []string{
			"stale_backend shop/cart:grpc cluster_ip 10.97.233.167:9090/TCP 10.214.1.41:50051",
			"stale_backend shop/cart:metrics cluster_ip 10.97.233.167:9100/TCP 10.214.1.41:9100",
			"stale_frontend shop/payments:https cluster_ip 10.97.230.30:443/TCP",
		}},
	} {
		t.Run(tc.dump, func(t *testing.T) {
			cs, err := clusterfile.LoadFiles(fixture.Path(t, tc.cluster))
			if err != nil {
				t.Fatal(err)
			}
			desired := watch.Expected("worker-b", cs)
			dump, err := os.ReadFile(fixture.Path(t, tc.dump))
			if err != nil {
				t.Fatal(err)
			}
			obs, err := nftables.ParseJSON(dump, nil, model.HintsFor(desired))
			if err != nil {
				t.Fatal(err)
			}
			got := findingtest.IDs(drift.Compare(desired, obs))
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}
