//go:build linux

package agent_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
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
	delSpec = bench.Spec{Services: 7, Endpoints: 2, NodePortEvery: 3}
	kept    = 5
)

// svcChains are the nat chains of a service with endpoints.
func svcChains(v bench.Service) []string {
	chains := []string{"KUBE-SVC-" + iptables.ChainHash(v.Port)}
	if v.NodePort != 0 {
		chains = append(chains, "KUBE-EXT-"+iptables.ChainHash(v.Port))
	}
	for _, ep := range v.Endpoints {
		chains = append(chains, "KUBE-SEP-"+iptables.EndpointChainHash(v.Port, ep.String()))
	}
	return chains
}

// syncOf is kube-proxy's iptables-restore --noflush input for spec's
// services in present (indexes): the others' rules left out, the chains of
// those in removed declared (flushed) and deleted in the same transaction.
func syncOf(spec bench.Spec, present map[int]bool, removed ...int) string {
	var absent []string
	var decl, del strings.Builder
	for i, v := range spec.List() {
		if present[i] {
			continue
		}
		absent = append(absent, svcChains(v)...)
		absent = append(absent, `"`+iptables.KubeProxyPortName(v.Port)+`"`, `"`+iptables.KubeProxyPortName(v.Port)+" ")
	}
	for _, i := range removed {
		for _, c := range svcChains(spec.List()[i]) {
			fmt.Fprintf(&decl, ":%s - [0:0]\n", c)
			fmt.Fprintf(&del, "-X %s\n", c)
		}
	}
	var out []string
	for _, l := range strings.Split(spec.IPTablesRestore(), "\n") {
		if !slices.ContainsFunc(absent, func(a string) bool { return strings.Contains(l, a) }) {
			out = append(out, l)
		}
	}
	text := strings.Join(out, "\n")
	nat := strings.Index(text, "*nat\n")
	rules := strings.Index(text[nat:], "\n-A ") + nat + 1
	end := strings.LastIndex(text, "COMMIT")
	return text[:rules] + decl.String() + text[rules:end] + del.String() + text[end:]
}

// upTo is the set of indexes below n.
func upTo(n int) map[int]bool {
	m := map[int]bool{}
	for i := range n {
		m[i] = true
	}
	return m
}

// svcDelRig is the real agent over a fake API holding delSpec's cluster, the
// real watcher and the real iptables-nft reader fed nf_tables events, in a
// netns holding delSpec's tables.
type svcDelRig struct {
	t    *testing.T
	ns   string
	spec bench.Spec
	api  *fakeAPI
	a    *agent.Agent
}

// sync commits a kube-proxy sync.
func (r *svcDelRig) sync(in string) {
	r.t.Helper()
	netnstest.RunInput(r.t, r.ns, in, "iptables-nft-restore", "--noflush")
}

// create adds service i and its slice to the API.
func (r *svcDelRig) create(i int) {
	r.t.Helper()
	ctx := context.Background()
	cs := r.spec.ClusterState()
	svc, sl := cs.Services[i], cs.EndpointSlices[i]
	if _, err := r.api.cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.api.cs.DiscoveryV1().EndpointSlices(sl.Namespace).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// startSvcDel starts the rig with spec's services in present, in the API
// and in the tables.
func startSvcDel(t *testing.T, spec bench.Spec, present map[int]bool) *svcDelRig {
	t.Helper()
	ns := newNetns(t)
	newKubeProxy(t, ns, modeIPTablesNFT) // skips without iptables-nft
	r := &svcDelRig{t: t, ns: ns, spec: spec}
	r.sync(syncOf(spec, present))
	cs := spec.ClusterState()
	var objs []runtime.Object
	for _, o := range cs.Nodes {
		objs = append(objs, o)
	}
	for i := range cs.Services {
		if present[i] {
			objs = append(objs, cs.Services[i], cs.EndpointSlices[i])
		}
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

// deleteInAPI deletes services (indexes) and their slices, as a Service
// deleted with its pods.
func (r *svcDelRig) deleteInAPI(idx ...int) {
	r.t.Helper()
	ctx := context.Background()
	for _, i := range idx {
		v := r.spec.List()[i]
		if err := r.api.cs.CoreV1().Services(v.Port.Namespace).Delete(ctx, v.Port.Name, metav1.DeleteOptions{}); err != nil {
			r.t.Fatal(err)
		}
		if err := r.api.cs.DiscoveryV1().EndpointSlices(v.Port.Namespace).Delete(ctx, v.Port.Name+"-abcde", metav1.DeleteOptions{}); err != nil {
			r.t.Fatal(err)
		}
	}
}

// converged waits for the agent to observe and want the services in
// present only, with no finding or pending change left.
func (r *svcDelRig) converged(what string, present map[int]bool) {
	r.t.Helper()
	gone := map[string]bool{}
	for i, v := range r.spec.List() {
		if !present[i] {
			gone[v.ClusterIP.String()] = true
		}
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
			r := startSvcDel(t, delSpec, upTo(delSpec.Services))
			for _, v := range delSpec.List() {
				if !observes(r.a.State(), v.ClusterIP.String()) {
					t.Fatalf("%s not observed before the deletion (the test's premise)", v.ClusterIP)
				}
			}
			if apiFirst {
				r.deleteInAPI(kept, kept+1)
				wait.For(t, 10*time.Second, "the mismatch seen", func() bool {
					s := r.a.State()
					return len(s.Pending)+len(s.Stale) > 0
				})
				r.sync(syncOf(delSpec, upTo(kept), kept, kept+1))
			} else {
				r.sync(syncOf(delSpec, upTo(kept), kept, kept+1))
				time.Sleep(300 * time.Millisecond)
				r.deleteInAPI(kept, kept+1)
			}
			r.converged("after the deletion", upTo(kept))
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

// TestLiveScenarioChain plays the lab's scenarios one after the other: a
// service is created with its endpoints, then deleted with its slice while
// the next one is created; kube-proxy syncs each change after a random
// delay, the deletion and the creation in one sync or in two. Every
// deletion must leave no stale_frontend and nothing pending.
func TestLiveScenarioChain(t *testing.T) {
	spec := bench.Spec{Services: 10, Endpoints: 1, NodePortEvery: 4}
	const permanent = 2
	rng := rand.New(rand.NewPCG(1, 2))
	present := upTo(permanent)
	r := startSvcDel(t, spec, present)
	delay := func() { time.Sleep(time.Duration(rng.IntN(800)) * time.Millisecond) }
	r.create(permanent)
	delay()
	present[permanent] = true
	r.sync(syncOf(spec, present))
	r.converged("first service", present)
	for i := permanent; i+1 < spec.Services; i++ {
		r.deleteInAPI(i)
		r.create(i + 1)
		delete(present, i)
		delay()
		if rng.IntN(2) == 0 {
			r.sync(syncOf(spec, present, i))
			delay()
			present[i+1] = true
			r.sync(syncOf(spec, present))
		} else {
			present[i+1] = true
			r.sync(syncOf(spec, present, i))
		}
		r.converged(fmt.Sprintf("service %d deleted, %d created", i, i+1), present)
		if !observes(r.a.State(), spec.List()[i+1].ClusterIP.String()) {
			t.Fatalf("service %d not observed after its creation", i+1)
		}
	}
}
