//go:build linux

package iptables_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/findingtest"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
	"github.com/netdrift/netdrift/internal/watch"
)

func loadCluster(t *testing.T, name string) *watch.ClusterState {
	t.Helper()
	cs, err := clusterfile.LoadFiles(fixture.Path(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// The drift a cart endpoint removal and a payments deletion must produce
// against worker-a's unchanged rules.
var staleFindings = []string{
	"stale_backend shop/cart:grpc cluster_ip 10.97.233.167:9090/TCP 10.214.1.41:50051",
	"stale_backend shop/cart:metrics cluster_ip 10.97.233.167:9100/TCP 10.214.1.41:9100",
	"stale_frontend shop/payments:https cluster_ip 10.97.230.30:443/TCP",
}

// mutate deletes endpoint ip from every slice of ns/svc and deletes service
// ns/del with its slices, on a copy of the cluster state.
func mutate(cs *watch.ClusterState, ns, svc, ip, del string) *watch.ClusterState {
	out := &watch.ClusterState{Nodes: cs.Nodes, Pods: cs.Pods}
	for _, s := range cs.Services {
		if s.Namespace == ns && s.Name == del {
			continue
		}
		out.Services = append(out.Services, s)
	}
	for _, sl := range cs.EndpointSlices {
		owner := sl.Labels["kubernetes.io/service-name"]
		if sl.Namespace == ns && owner == del {
			continue
		}
		if sl.Namespace == ns && owner == svc {
			sl = sl.DeepCopy()
			eps := sl.Endpoints[:0]
			for _, e := range sl.Endpoints {
				if len(e.Addresses) > 0 && e.Addresses[0] == ip {
					continue
				}
				eps = append(eps, e)
			}
			sl.Endpoints = eps
		}
		out.EndpointSlices = append(out.EndpointSlices, sl)
	}
	return out
}

func compare(t *testing.T, cs *watch.ClusterState, obs model.Observed) []string {
	t.Helper()
	return findingtest.IDs(drift.Compare(watch.Expected("worker-a", cs), obs))
}

func assertFindings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: findings\n got %q\nwant %q", what, got, want)
	}
}

// TestIPTablesDriftOffline: the parsed fixture against the cluster objects.
func TestIPTablesDriftOffline(t *testing.T) {
	cs := loadCluster(t, "cluster.json")
	opts := model.HintsFor(watch.Expected("worker-a", cs))
	obs, err := iptables.Parse(iptables.Dumps{IPv4: iptables.ReadTestdata(t, "worker-a.iptables-save")}, opts)
	if err != nil {
		t.Fatal(err)
	}
	assertFindings(t, "converged", compare(t, cs, obs), nil)
	stale, err := iptables.Parse(iptables.Dumps{IPv4: iptables.ReadTestdata(t, "stale.worker-a.iptables-save")}, opts)
	if err != nil {
		t.Fatal(err)
	}
	assertFindings(t, "stale.cluster.json", compare(t, loadCluster(t, "stale.cluster.json"), stale), staleFindings)
	assertFindings(t, "cart endpoint and payments deleted", compare(t, mutate(cs, "shop", "cart", "10.214.1.41", "payments"), stale), staleFindings)
}

// TestIPTablesDriftLive: kube-proxy's rules restored into a netns, read with
// the live reader; changing the cluster objects yields exactly the drift.
func TestIPTablesDriftLive(t *testing.T) {
	rules := iptables.ReadTestdata(t, "worker-a.iptables-save")
	cs := loadCluster(t, "cluster.json")
	for _, backend := range []string{iptables.BackendLegacy, iptables.BackendNFT} {
		t.Run(backend, func(t *testing.T) {
			iptables.RequireBackend(t, backend, false)
			ns := iptables.NewTestNetns(t)
			iptables.AddNFAcct(t, ns, rules)
			if err := iptables.RestoreInto(ns, backend, false, rules); err != nil {
				t.Fatal(err)
			}
			desired := watch.Expected("worker-a", cs)
			src := &iptables.Reader{Config: iptables.Config{NetNS: ns}}
			src.SetHints(model.HintsFor(desired))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			obs, err := src.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			assertFindings(t, "converged", compare(t, cs, obs), nil)
			steps := []struct {
				name string
				cs   *watch.ClusterState
				want []string
			}{
				{"cart endpoint 10.214.1.41 deleted", mutate(cs, "shop", "cart", "10.214.1.41", ""), staleFindings[:2]},
				{"payments deleted", mutate(cs, "shop", "", "", "payments"), staleFindings[2:]},
				{"both", mutate(cs, "shop", "cart", "10.214.1.41", "payments"), staleFindings},
			}
			for _, s := range steps {
				assertFindings(t, s.name, compare(t, s.cs, obs), s.want)
			}
			// A backend the API has that the node lacks: a new cart endpoint.
			added := mutate(cs, "shop", "", "", "")
			for i, sl := range added.EndpointSlices {
				if sl.Namespace == "shop" && sl.Labels["kubernetes.io/service-name"] == "search" {
					sl = sl.DeepCopy()
					e := sl.Endpoints[0].DeepCopy()
					e.Addresses = []string{"10.214.2.99"}
					sl.Endpoints = append(sl.Endpoints, *e)
					added.EndpointSlices[i] = sl
				}
			}
			got := compare(t, added, obs)
			if len(got) == 0 || !containsAll(got, "missing_backend shop/search:http", "10.214.2.99:8080") {
				t.Errorf("new search endpoint: findings %q", got)
			}
			t.Logf("%s: live findings checked, %d frontends", backend, len(obs.Frontends))
		})
	}
}

func containsAll(lines []string, subs ...string) bool {
	for _, l := range lines {
		ok := true
		for _, s := range subs {
			if !strings.Contains(l, s) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}
