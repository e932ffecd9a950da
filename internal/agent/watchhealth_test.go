package agent_test

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/agent/agenttest"
	"github.com/netdrift/netdrift/internal/metrics"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/wait"
	"github.com/netdrift/netdrift/internal/watch"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// apiKubeProxy is a fake datapath that programs exactly what the API holds,
// read straight from the API (not through the agent's gated watch), so it
// sees changes the agent cannot. Frozen, it keeps its last programming.
type apiKubeProxy struct {
	client kubernetes.Interface
	mu     sync.Mutex
	frozen bool
	last   model.Observed
}

func (k *apiKubeProxy) Name() string { return model.ModeIPTables }

func (k *apiKubeProxy) Snapshot(ctx context.Context) (model.Observed, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.frozen {
		return k.last, nil
	}
	obs := model.Observed{Datapath: model.ModeIPTables, Frontends: map[model.Frontend]model.Verdict{}}
	svcs, err := k.client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return obs, err
	}
	slices, err := k.client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return obs, err
	}
	cs := &watch.ClusterState{}
	for i := range svcs.Items {
		cs.Services = append(cs.Services, &svcs.Items[i])
	}
	for i := range slices.Items {
		cs.EndpointSlices = append(cs.EndpointSlices, &slices.Items[i])
	}
	for fe, v := range watch.Expected(nodeName, cs).Frontends {
		v.Endpoints, v.Evidence = nil, nil
		obs.Frontends[fe] = v
	}
	k.last = obs
	return obs, nil
}

func (k *apiKubeProxy) freeze() {
	k.mu.Lock()
	k.frozen = true
	k.mu.Unlock()
}

// gauge reads one gauge of a registry (labels as name=value pairs).
func gauge(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}

// TestWatchHealthFakeAPI: the fake API delivers Lease renewals, then stops
// delivering anything (a hung watch) while the cluster and kube-proxy move
// on. netdrift_watch_healthy drops to 0 and the mismatch the agent sees
// meanwhile (its view is old, the node is right) never becomes a stale
// finding: neither before the hang is noticed nor after. Once delivery
// resumes the agent catches up and nothing was ever reported; a control at
// the end shows that the same setup does promote a real stale backend.
func TestWatchHealthFakeAPI(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	api := newFakeAPI(t, testService("10.96.0.10"), testSlice(t0, "10.244.1.10", "10.244.1.11", "10.244.1.12"),
		testNode(), lease(t0))
	t.Cleanup(func() { api.setGate(true) })
	kp := &apiKubeProxy{client: api.cs}
	cfg := agent.DefaultConfig()
	cfg.NodeName, cfg.StaleAfter, cfg.WatchUnhealthyAfter = nodeName, time.Second, 2*time.Second
	cfg.AuditInterval = 250 * time.Millisecond // no nft events here: audits find kube-proxy's changes
	var a *agent.Agent
	var slicesDelivered atomic.Int64 // EndpointSlice events handed to the agent
	w := informer.NewWatcher(api.cs, nodeName, clk, func(ev watch.Event) {
		a.OnEvent(ev)
		if ev.Kind == watch.KindEndpointSlice {
			slicesDelivered.Add(1)
		}
	})
	a = agent.New(agent.Options{Config: cfg, Clock: clk, Cluster: w, Datapath: agenttest.Reader(kp), Mode: model.ModeIPTables})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(a.State, "test", 100))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Start(ctx)
	api.waitWatches(w)
	wait.For(t, 10*time.Second, "the Lease delivered", func() bool { return a.State().Watch.LeaseSeen })
	step := func(d time.Duration) agent.State {
		clk.Step(d)
		a.Step(ctx)
		return a.State()
	}
	if s := step(0); !s.Ready || !s.Watch.Healthy || len(s.Stale)+len(s.Pending) != 0 {
		t.Fatalf("start: ready=%v healthy=%v stale=%v pending=%v", s.Ready, s.Watch.Healthy, s.Stale, s.Pending)
	}
	// Renewals arrive: healthy.
	clk.Step(time.Second)
	api.renewLease(clk.Now())
	renewed := clk.Now()
	wait.For(t, 10*time.Second, "the renewal delivered", func() bool { return a.State().Watch.LastLeaseRenew.Equal(renewed) })
	step(0)
	if g := gauge(t, reg, "netdrift_watch_healthy"); g != 1 {
		t.Fatalf("netdrift_watch_healthy %v while renewals arrive", g)
	}

	// The watch hangs. The API removes an endpoint, kube-proxy programs it;
	// the kubelet keeps renewing; nothing reaches the agent.
	api.setGate(false)
	clk.Step(200 * time.Millisecond)
	api.updateSlice(testSlice(clk.Now(), "10.244.1.10", "10.244.1.11"))
	s := step(250 * time.Millisecond)
	if len(s.Pending) != 1 || len(s.Stale) != 0 {
		t.Fatalf("after the hidden change: pending %v stale %v", s.Pending, s.Stale)
	}
	first := s.Pending[0].FirstSeen
	sawUnnoticed := false
	for i := 0; i < 20; i++ {
		clk.Step(500 * time.Millisecond)
		api.renewLease(clk.Now())
		s = step(0)
		if len(s.Stale) != 0 {
			t.Fatalf("at +%v (watch healthy=%v): stale finding for a change the agent could not see: %+v",
				clk.Since(first), s.Watch.Healthy, s.Stale)
		}
		if s.Watch.Healthy && clk.Since(first) >= cfg.StaleAfter {
			sawUnnoticed = true // the hang not yet noticed, the mismatch older than --stale-after
		}
	}
	if !sawUnnoticed {
		t.Error("the test never checked the window in which the hang is not yet noticed")
	}
	if g := gauge(t, reg, "netdrift_watch_healthy"); g != 0 || s.Watch.Healthy {
		t.Fatalf("netdrift_watch_healthy %v (state %v: %s) after 10s without a delivered renewal", g, s.Watch.Healthy, s.Watch.HealthReason)
	}
	if g := gauge(t, reg, "netdrift_findings", "kind", string(model.MissingBackend)); g != 0 {
		t.Fatalf("netdrift_findings{kind=missing_backend} %v", g)
	}
	if g := gauge(t, reg, "netdrift_pending_mismatches"); g != 1 {
		t.Fatalf("netdrift_pending_mismatches %v, want the hidden mismatch pending", g)
	}
	if n := backends(s, "10.96.0.10:80"); n != 3 {
		t.Fatalf("the agent's desired state has %d backends: the gate leaked the change", n)
	}

	// Delivery resumes: the agent catches up and the mismatch heals.
	slicesBefore := slicesDelivered.Load()
	api.setGate(true)
	last := clk.Now()
	// Delivered to the agent, not only to the watcher's cache: the informer
	// updates its cache before it calls the handler, and the Lease's informer
	// may deliver before the slices'.
	wait.For(t, 10*time.Second, "withheld events delivered", func() bool {
		return a.State().Watch.LastLeaseRenew.Equal(last) && slicesDelivered.Load() > slicesBefore
	})
	s = step(100 * time.Millisecond)
	if !s.Watch.Healthy || len(s.Stale)+len(s.Pending)+len(s.PendingChanges) != 0 || backends(s, "10.96.0.10:80") != 2 {
		t.Fatalf("after recovery: healthy=%v stale=%v pending=%v changes=%v", s.Watch.Healthy, s.Stale, s.Pending, s.PendingChanges)
	}
	if g := gauge(t, reg, "netdrift_watch_healthy"); g != 1 {
		t.Fatalf("netdrift_watch_healthy %v after recovery", g)
	}

	// Control: kube-proxy freezes while the watch is healthy: promoted.
	kp.freeze()
	api.updateSlice(testSlice(clk.Now(), "10.244.1.10"))
	wait.For(t, 10*time.Second, "slice update delivered", func() bool {
		return len(w.SlicesFor(model.ServiceName{Namespace: testNS, Name: testSvc})[0].Endpoints) == 1
	})
	for i := 0; i < 3; i++ {
		clk.Step(500 * time.Millisecond)
		api.renewLease(clk.Now())
		at := clk.Now()
		wait.For(t, 10*time.Second, "renewal delivered", func() bool { return a.State().Watch.LastLeaseRenew.Equal(at) })
		s = step(0)
	}
	want := netip.MustParseAddrPort("10.244.1.11:8080")
	if len(s.Stale) != 1 || s.Stale[0].Kind != model.StaleBackend || s.Stale[0].Backend != want {
		t.Fatalf("control: a frozen kube-proxy with a healthy watch: stale %+v pending %+v", s.Stale, s.Pending)
	}
	if g := gauge(t, reg, "netdrift_findings", "kind", string(model.StaleBackend)); g != 1 {
		t.Fatalf("control: netdrift_findings{kind=stale_backend} %v", g)
	}
}

func backends(s agent.State, fe string) int {
	for f, v := range s.Desired.Frontends {
		if f.String() == fe && f.Kind == model.ClusterIP {
			return len(v.Backends)
		}
	}
	return -1
}
