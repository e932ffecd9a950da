//go:build linux

package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"github.com/netdrift/netdrift/internal/testutil/wait"
	"github.com/netdrift/netdrift/internal/watch"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// delSpec's last two services are deleted: one of them a node port
// service (KUBE-EXT chain), both with endpoints.
var (
	delSpec  = bench.Spec{Services: 7, Endpoints: 2, NodePortEvery: 3}
	keptSpec = bench.Spec{Services: 5, Endpoints: 2, NodePortEvery: 3}
)

// deletionSync is kube-proxy's iptables-restore --noflush input once the
// services past keptSpec are gone: the kept tables, KUBE-SERVICES and
// KUBE-NODEPORTS without their rules, their chains declared (flushed) and
// deleted in the same transaction.
func deletionSync() string {
	var decl, del strings.Builder
	for _, v := range delSpec.List()[keptSpec.Services:] {
		chains := []string{"KUBE-SVC-" + iptables.ChainHash(v.Port)}
		if v.NodePort != 0 {
			chains = append(chains, "KUBE-EXT-"+iptables.ChainHash(v.Port))
		}
		for _, ep := range v.Endpoints {
			chains = append(chains, "KUBE-SEP-"+iptables.EndpointChainHash(v.Port, ep.String()))
		}
		for _, c := range chains {
			fmt.Fprintf(&decl, ":%s - [0:0]\n", c)
			fmt.Fprintf(&del, "-X %s\n", c)
		}
	}
	text := keptSpec.IPTablesRestore()
	nat := strings.Index(text, "*nat\n")
	rules := strings.Index(text[nat:], "\n-A ") + nat + 1
	end := strings.LastIndex(text, "COMMIT")
	return text[:rules] + decl.String() + text[rules:end] + del.String() + text[end:]
}

// svcDelRig is the real agent over a fake API holding delSpec's cluster, the
// real watcher and the real iptables-nft reader fed nf_tables events, in a
// netns holding delSpec's tables.
type svcDelRig struct {
	t   *testing.T
	ns  string
	api *fakeAPI
	a   *agent.Agent
}

func startSvcDel(t *testing.T) *svcDelRig {
	t.Helper()
	ns := newNetns(t)
	newKubeProxy(t, ns, modeIPTablesNFT) // skips without iptables-nft
	r := &svcDelRig{t: t, ns: ns}
	netnstest.RunInput(t, ns, delSpec.IPTablesRestore(), "iptables-nft-restore", "--noflush")
	cs := delSpec.ClusterState()
	var objs []runtime.Object
	for _, o := range cs.Nodes {
		objs = append(objs, o)
	}
	for _, o := range cs.Services {
		objs = append(objs, o)
	}
	for _, o := range cs.EndpointSlices {
		objs = append(objs, o)
	}
	r.api = newFakeAPI(t, objs...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := agent.DefaultConfig()
	cfg.NodeName, cfg.StaleAfter, cfg.WatchUnhealthyAfter, cfg.MinPollCostFactor = bench.NodeName, time.Second, time.Minute, 1
	src, err := datapath.Open(model.ModeIPTables, ns)
	if err != nil {
		t.Fatal(err)
	}
	cw, err := datapath.WatchChanges(ctx, ns)
	if err != nil {
		t.Fatalf("nf_tables events: %v", err)
	}
	t.Cleanup(func() { _ = cw.Close() })
	w := informer.NewWatcher(r.api.cs, bench.NodeName, clock.RealClock{}, func(ev watch.Event) { r.a.OnEvent(ev) })
	r.a = agent.New(agent.Options{Config: cfg, Clock: clock.RealClock{}, Mode: model.ModeIPTables, Datapath: src,
		Changes: cw.Events(), Cluster: w})
	w.Start(ctx)
	r.api.waitWatches(w)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wait.For(t, 30*time.Second, "the agent ready and converged", func() bool {
		s := r.a.State()
		return s.Ready && len(s.Observed.Frontends) > 0 && s.Converged()
	})
	return r
}

// deleteInAPI deletes the services past keptSpec and their slices, as a
// Service deleted with its pods.
func (r *svcDelRig) deleteInAPI() {
	r.t.Helper()
	ctx := context.Background()
	for _, v := range delSpec.List()[keptSpec.Services:] {
		if err := r.api.cs.CoreV1().Services(v.Port.Namespace).Delete(ctx, v.Port.Name, metav1.DeleteOptions{}); err != nil {
			r.t.Fatal(err)
		}
		if err := r.api.cs.DiscoveryV1().EndpointSlices(v.Port.Namespace).Delete(ctx, v.Port.Name+"-abcde", metav1.DeleteOptions{}); err != nil {
			r.t.Fatal(err)
		}
	}
}

// converged waits for the agent to observe and want the kept services only,
// with no finding or pending change left.
func (r *svcDelRig) converged(what string) {
	r.t.Helper()
	gone := map[string]bool{}
	for _, v := range delSpec.List()[keptSpec.Services:] {
		gone[v.ClusterIP.String()] = true
	}
	var s agent.State
	wait.For(r.t, 15*time.Second, what+": converged without the deleted services", func() bool {
		s = r.a.State()
		for f := range s.Observed.Frontends {
			if gone[f.IP.String()] {
				return false
			}
		}
		return s.Converged()
	})
}

// TestLiveServiceDeletedWithItsPods: two services (one a node port
// service) and their slices are deleted from the API; kube-proxy's sync
// removes their rules and chains after the agent saw the deletion, or
// before. The agent ends with no stale_frontend and nothing pending.
func TestLiveServiceDeletedWithItsPods(t *testing.T) {
	for _, apiFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("api first %v", apiFirst), func(t *testing.T) {
			r := startSvcDel(t)
			for _, v := range delSpec.List() {
				if !observes(r.a.State(), v.ClusterIP.String()) {
					t.Fatalf("%s not observed before the deletion (the test's premise)", v.ClusterIP)
				}
			}
			if apiFirst {
				r.deleteInAPI()
				wait.For(t, 10*time.Second, "the mismatch seen", func() bool {
					s := r.a.State()
					return len(s.Pending)+len(s.Stale) > 0
				})
				netnstest.RunInput(t, r.ns, deletionSync(), "iptables-nft-restore", "--noflush")
			} else {
				netnstest.RunInput(t, r.ns, deletionSync(), "iptables-nft-restore", "--noflush")
				time.Sleep(300 * time.Millisecond)
				r.deleteInAPI()
			}
			r.converged("after the deletion")
		})
	}
}

// observes reports whether the agent's observed state has a frontend on ip.
func observes(s agent.State, ip string) bool {
	for f := range s.Observed.Frontends {
		if f.IP.String() == ip {
			return true
		}
	}
	return false
}
