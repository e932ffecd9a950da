package agent

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

const node = "n1"

var start = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func service(name, ip string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
}

func slice(svc string, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr(node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// harness drives the agent with a fake clock, a fake cluster and a fake datapath.
type harness struct {
	t     *testing.T
	clk   *clocktesting.FakeClock
	c     *fakeCluster
	src   *fakeSource
	a     *Agent
	lags  []drift.LagSample
	ctx   context.Context
	delay map[string][]time.Duration
}

func (h *harness) ObserveLag(s drift.LagSample) { h.lags = append(h.lags, s) }
func (h *harness) ObserveWatchDelay(src string, d time.Duration) {
	h.delay[src] = append(h.delay[src], d)
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, nil) }

func newHarnessWith(t *testing.T, tweak func(*Config), nodeSources ...FindingSource) *harness {
	h := &harness{t: t, clk: clocktesting.NewFakeClock(start), c: newFakeCluster(), src: &fakeSource{},
		ctx: context.Background(), delay: map[string][]time.Duration{}}
	cfg := DefaultConfig()
	cfg.NodeName = node
	if tweak != nil {
		tweak(&cfg)
	}
	h.a = New(Options{Config: cfg, Clock: h.clk, Cluster: h.c, Datapath: h.src, Mode: model.ModeIPTables, Recorder: h,
		NodeSources: nodeSources})
	return h
}

// desiredOf is what kube-proxy would program for the fake cluster now.
func (h *harness) desiredOf() model.Observed {
	obs := model.Observed{Datapath: model.ModeIPTables, Frontends: map[model.Frontend]model.Verdict{}}
	for _, k := range h.c.ServiceKeys() {
		for fe, v := range watch.ExpectedService(nil, node, h.c.Service(k), h.c.SlicesFor(k)) {
			v.Endpoints, v.Evidence = nil, nil
			obs.Frontends[fe] = v
		}
	}
	return obs
}

// kubeProxySyncs makes the fake datapath match the cluster.
func (h *harness) kubeProxySyncs() { h.src.set(h.desiredOf(), nil) }

func (h *harness) setSlice(s *discoveryv1.EndpointSlice, trigger time.Time) {
	h.c.mu.Lock()
	h.c.slices["shop/"+s.Labels[discoveryv1.LabelServiceName]] = []*discoveryv1.EndpointSlice{s}
	h.c.mu.Unlock()
	h.a.OnEvent(watch.Event{Kind: watch.KindEndpointSlice, Service: model.ServiceName{Namespace: "shop", Name: s.Labels[discoveryv1.LabelServiceName]},
		At: h.clk.Now(), TriggerTime: trigger})
}

func (h *harness) advance(d time.Duration) {
	h.clk.Step(d)
	h.a.Step(h.ctx)
}

func (h *harness) start() {
	h.c.services["shop/web"] = service("web", "10.96.0.10")
	h.c.slices["shop/web"] = []*discoveryv1.EndpointSlice{slice("web", "10.1.0.1", "10.1.0.2")}
	h.kubeProxySyncs()
	h.a.Step(h.ctx)
	if s := h.a.State(); !s.Ready || len(s.Stale)+len(s.Pending) != 0 {
		h.t.Fatalf("initial state not clean: ready=%v stale=%v pending=%v", s.Ready, s.Stale, s.Pending)
	}
}

func TestLoopLagExact(t *testing.T) {
	cases := []struct {
		name string
		ips  []string
		kind drift.ChangeKind
	}{
		{"add", []string{"10.1.0.1", "10.1.0.2", "10.1.0.3"}, drift.ChangeAdd},
		{"remove", []string{"10.1.0.1"}, drift.ChangeRemove},
		{"update", []string{"10.1.0.1", "10.1.0.9"}, drift.ChangeUpdate},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.start()
			t1 := h.clk.Now()
			h.setSlice(slice("web", tc.ips...), t1.Add(-40*time.Millisecond))
			for i := 0; i < 3; i++ { // kube-proxy has not synced yet: pending
				h.advance(100 * time.Millisecond)
			}
			if p := h.a.State().PendingChanges; len(p) != 1 || p[0].Kind != tc.kind {
				t.Fatalf("pending %+v", p)
			}
			h.kubeProxySyncs()
			h.advance(100 * time.Millisecond)
			if len(h.lags) != 1 {
				t.Fatalf("samples %+v", h.lags)
			}
			s := h.lags[0]
			if s.Kind != tc.kind || s.NodeLag() != 400*time.Millisecond {
				t.Fatalf("sample %+v lag %v", s, s.NodeLag())
			}
			if l, ok := s.NetworkLatency(); !ok || l != 440*time.Millisecond {
				t.Fatalf("network latency %v", l)
			}
			if d := h.delay["endpointslice"]; len(d) != 1 || d[0] != 40*time.Millisecond {
				t.Fatalf("watch delay %v", d)
			}
			if st := h.a.State(); len(st.PendingChanges) != 0 || len(st.Stale) != 0 || !st.Converged() {
				t.Fatalf("not converged: %+v", st)
			}
		})
	}
}

// TestLoopLagDatedByTheReader: a read whose observation says since when
// its state held (Cilium's map-write stamp) dates the sample by that time,
// not by the read, and the sample says so; a stamp older than the
// delivery dates it at the delivery.
func TestLoopLagDatedByTheReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		held time.Duration // after the delivery
		want time.Duration // T2-T1
	}{
		{"written after the delivery", 130 * time.Millisecond, 130 * time.Millisecond},
		{"written before the delivery", -50 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.start()
			t1 := h.clk.Now()
			h.setSlice(slice("web", "10.1.0.1", "10.1.0.2", "10.1.0.3"), time.Time{})
			for i := 0; i < 3; i++ { // not programmed yet: pending
				h.advance(100 * time.Millisecond)
			}
			obs := h.desiredOf()
			obs.HeldSince = t1.Add(tc.held)
			h.src.set(obs, nil)
			h.advance(100 * time.Millisecond)
			if len(h.lags) != 1 {
				t.Fatalf("samples %+v", h.lags)
			}
			if s := h.lags[0]; s.NodeLag() != tc.want || s.T2Source != drift.T2WriteStamp {
				t.Errorf("T2-T1 %v source %q, want %v %q (the read was %v after the delivery)", s.NodeLag(), s.T2Source,
					tc.want, drift.T2WriteStamp, h.clk.Now().Sub(t1))
			}
		})
	}
	// Without the reader's dating, the read dates the sample, and no
	// source is named.
	h := newHarness(t)
	h.start()
	h.setSlice(slice("web", "10.1.0.1"), time.Time{})
	h.advance(100 * time.Millisecond)
	h.kubeProxySyncs()
	h.advance(100 * time.Millisecond)
	if len(h.lags) != 1 || h.lags[0].NodeLag() != 200*time.Millisecond || h.lags[0].T2Source != "" {
		t.Errorf("read-dated samples %+v", h.lags)
	}
}

func TestLoopSupersededChange(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.setSlice(slice("web", "10.1.0.1"), time.Time{})
	h.advance(200 * time.Millisecond)
	t1 := h.clk.Now()
	h.setSlice(slice("web", "10.1.0.1", "10.1.0.5"), time.Time{})
	h.advance(300 * time.Millisecond)
	h.kubeProxySyncs()
	h.advance(100 * time.Millisecond)
	if len(h.lags) != 1 || h.lags[0].T1 != t1 || h.lags[0].NodeLag() != 400*time.Millisecond || h.lags[0].Superseded != 1 {
		t.Fatalf("samples %+v", h.lags)
	}
	if _, ok := h.lags[0].NetworkLatency(); ok {
		t.Fatal("latency without a trigger time")
	}
}

func TestLoopNoSamplesBeforeStart(t *testing.T) {
	h := newHarness(t)
	h.c.synced = false
	h.c.services["shop/web"] = service("web", "10.96.0.10")
	h.setSlice(slice("web", "10.1.0.1"), start.Add(-time.Hour)) // the initial list, as informers deliver it
	h.a.Step(h.ctx)
	if s := h.a.State(); s.Ready || s.ReadyReason == "" {
		t.Fatalf("ready before sync: %+v", s)
	}
	h.c.synced = true
	h.kubeProxySyncs()
	h.advance(time.Second)
	if len(h.lags) != 0 || len(h.a.State().PendingChanges) != 0 {
		t.Fatalf("changes from before the agent started were measured: %+v", h.lags)
	}
}

func TestLoopStaleFindingAndHeal(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.setSlice(slice("web", "10.1.0.1"), time.Time{}) // kube-proxy frozen: 10.1.0.2 stays
	h.advance(100 * time.Millisecond)
	h.advance(4800 * time.Millisecond)
	if s := h.a.State(); len(s.Stale) != 0 || len(s.Pending) != 1 {
		t.Fatalf("promoted before --stale-after: %+v", s.Stale)
	}
	h.advance(300 * time.Millisecond)
	s := h.a.State()
	if len(s.Stale) != 1 || s.Stale[0].Kind != model.StaleBackend || s.Stale[0].Backend != netip.MustParseAddrPort("10.1.0.2:8080") {
		t.Fatalf("stale %+v", s.Stale)
	}
	if s.OldestPendingChange() < 5*time.Second {
		t.Fatalf("oldest pending change %v", s.OldestPendingChange())
	}
	h.kubeProxySyncs()
	h.advance(100 * time.Millisecond)
	if s := h.a.State(); len(s.Stale) != 0 || len(h.lags) != 1 || h.lags[0].NodeLag() != 5300*time.Millisecond {
		t.Fatalf("not healed: stale %v lags %+v", s.Stale, h.lags)
	}
}

func TestLoopWatchUnhealthyBlocksPromotion(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.a.OnEvent(watch.Event{Kind: watch.KindLease, At: h.clk.Now(), LeaseRenew: h.clk.Now().Add(-20 * time.Millisecond)})
	h.advance(26 * time.Second) // no renewal delivered: the API server or the watch stalls
	if h.a.State().Watch.Healthy {
		t.Fatal("watch still healthy after 26s without a Lease renewal")
	}
	// Meanwhile the datapath changes (kube-proxy saw something the agent could not).
	obs := h.desiredOf()
	fe := model.NewFrontend(netip.MustParseAddr("10.96.0.10"), 80, model.TCP, model.ClusterIP)
	v := obs.Frontends[fe]
	v.Backends = []netip.AddrPort{netip.MustParseAddrPort("10.1.0.1:8080")}
	obs.Frontends[fe] = v
	h.src.set(obs, nil)
	for i := 0; i < 30; i++ {
		h.advance(time.Second)
	}
	if s := h.a.State(); len(s.Stale) != 0 || len(s.Pending) != 1 {
		t.Fatalf("stale finding raised while the watch is unhealthy: %+v", s.Stale)
	}
	h.a.OnEvent(watch.Event{Kind: watch.KindLease, At: h.clk.Now(), LeaseRenew: h.clk.Now()})
	h.advance(time.Second)
	if s := h.a.State(); !s.Watch.Healthy || len(s.Stale) != 1 {
		t.Fatalf("after recovery: healthy=%v stale=%v", s.Watch.Healthy, s.Stale)
	}
}

func TestLoopDegradedSourceKeepsRunning(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.src.set(model.Observed{}, errors.New("iptables-save: exit status 1"))
	h.advance(11 * time.Second)
	s := h.a.State()
	if len(s.Sources) != 1 || s.Sources[0].Up || s.Sources[0].Error == "" || len(s.Notes) == 0 {
		t.Fatalf("degraded source not reported: %+v", s.Sources)
	}
	h.kubeProxySyncs()
	h.advance(11 * time.Second)
	if s := h.a.State(); !s.Sources[0].Up {
		t.Fatal("source not retried")
	}
}

func TestLoopNoKubeProxyStateThenDetected(t *testing.T) {
	h := newHarness(t)
	h.c.services["shop/web"] = service("web", "10.96.0.10")
	h.c.slices["shop/web"] = []*discoveryv1.EndpointSlice{slice("web", "10.1.0.1")}
	h.src.set(model.Observed{Datapath: model.ModeNone, Warnings: []string{"no kube-proxy table yet"}}, nil)
	for i := 0; i < 3; i++ {
		h.advance(10 * time.Second)
	}
	s := h.a.State()
	if s.Datapath != model.ModeNone || len(s.Stale)+len(s.Pending) != 0 || len(s.Notes) == 0 {
		t.Fatalf("absent kube-proxy state reported as drift: datapath=%s stale=%v pending=%v notes=%v", s.Datapath, s.Stale, s.Pending, s.Notes)
	}
	h.kubeProxySyncs() // kube-proxy's first sync lands
	h.advance(10 * time.Second)
	if s := h.a.State(); s.Datapath != model.ModeIPTables || len(s.Stale)+len(s.Pending) != 0 {
		t.Fatalf("after kube-proxy synced: datapath=%s stale=%v pending=%v", s.Datapath, s.Stale, s.Pending)
	}
}

func TestLoopWatchRecoversOnAnyDelivery(t *testing.T) {
	var downSince time.Time
	h := newHarnessWith(t, func(c *Config) {
		c.API = func() APIState {
			return APIState{Failing: !downSince.IsZero(), FailingSince: downSince, Failures: 3,
				LastError: "dial tcp 10.0.0.1:6443: connect: connection refused"}
		}
	})
	h.start()
	h.a.OnEvent(watch.Event{Kind: watch.KindLease, At: h.clk.Now(), LeaseRenew: h.clk.Now()})
	downSince = h.clk.Now()
	h.advance(30 * time.Second) // API server down: nothing delivered
	if w := h.a.State().Watch; w.Healthy || !strings.Contains(w.HealthReason, "fail since 30s ago (dial tcp") {
		t.Fatalf("after 30 s without deliveries: healthy %v, reason %q; want unhealthy naming the refused dials", w.Healthy, w.HealthReason)
	}
	downSince = time.Time{}
	// The API server is back: the EndpointSlice watch delivers before the
	// Lease informer's re-watch does.
	h.setSlice(slice("web", "10.1.0.1", "10.1.0.2"), time.Time{})
	h.advance(100 * time.Millisecond)
	if !h.a.State().Watch.Healthy {
		t.Fatal("a fresh delivery did not restore watch health")
	}
}

// TestStartNotesReachTheStatus: a degraded mode known at start (change
// events dated when read) is among the status notes after every audit.
func TestStartNotesReachTheStatus(t *testing.T) {
	h := newHarness(t)
	const note = "nftables change events are dated when the agent reads them, not by the kernel"
	h.a = New(Options{Config: h.a.cfg, Clock: h.clk, Cluster: h.c, Datapath: h.src, Mode: model.ModeIPTables,
		Recorder: h, Notes: []string{note}})
	h.kubeProxySyncs()
	h.start()
	for i := 0; i < 2; i++ {
		h.advance(11 * time.Second)
		if n := h.a.State().Notes; !slices.Contains(n, note) {
			t.Fatalf("audit %d: notes %q lack the start note", i, n)
		}
	}
}

// TestLagStateIsStatesLagPart: LagState carries State's samples and
// pending changes, and none of the desired or observed state it copies.
func TestLagStateIsStatesLagPart(t *testing.T) {
	checkPendingThenMeasured(t, func(h *harness, what string) {
		t.Helper()
		full, lag := h.a.State(), h.a.LagState()
		if !reflect.DeepEqual(lag.Recent, full.Recent) || !reflect.DeepEqual(lag.PendingChanges, full.PendingChanges) ||
			lag.Node != full.Node || !lag.Now.Equal(full.Now) {
			t.Fatalf("%s: LagState samples %v pending %v, State's %v %v", what, lag.Recent, lag.PendingChanges, full.Recent, full.PendingChanges)
		}
		if len(lag.Desired.Frontends)+len(lag.Observed.Frontends) != 0 || len(full.Desired.Frontends) == 0 {
			t.Fatalf("%s: LagState copied %d desired and %d observed frontends (State: %d desired)", what,
				len(lag.Desired.Frontends), len(lag.Observed.Frontends), len(full.Desired.Frontends))
		}
	})
}

// checkPendingThenMeasured runs check once a change is delivered and
// pending, and again once kube-proxy programmed it and it was measured.
func checkPendingThenMeasured(t *testing.T, check func(h *harness, what string)) {
	t.Helper()
	h := newHarness(t)
	h.start()
	h.setSlice(slice("web", "10.1.0.1", "10.1.0.2", "10.1.0.3"), time.Time{})
	h.advance(10 * time.Millisecond)
	if len(h.a.LagState().PendingChanges) == 0 {
		t.Fatal("no pending change after a delivery the datapath does not show yet")
	}
	check(h, "pending")
	h.kubeProxySyncs()
	h.advance(200 * time.Millisecond)
	if len(h.a.LagState().Recent) == 0 {
		t.Fatal("no lag sample after kube-proxy programmed the change")
	}
	check(h, "measured")
}

// TestSummaryStateIsStateWithoutFrontends: SummaryState is State with no
// desired state and no observed frontends; everything the status, drift,
// readiness and RST handlers read is the same.
func TestSummaryStateIsStateWithoutFrontends(t *testing.T) {
	checkPendingThenMeasured(t, func(h *harness, what string) {
		t.Helper()
		full, sum := h.a.State(), h.a.SummaryState()
		if len(sum.Desired.Frontends)+len(sum.Observed.Frontends) != 0 || len(full.Desired.Frontends) == 0 || len(full.Observed.Frontends) == 0 {
			t.Fatalf("%s: SummaryState has %d desired and %d observed frontends (State: %d, %d)", what,
				len(sum.Desired.Frontends), len(sum.Observed.Frontends), len(full.Desired.Frontends), len(full.Observed.Frontends))
		}
		if full.DesiredFrontends != len(full.Desired.Frontends) || full.ObservedFrontends != len(full.Observed.Frontends) {
			t.Fatalf("%s: counts %d desired, %d observed; the maps hold %d, %d", what,
				full.DesiredFrontends, full.ObservedFrontends, len(full.Desired.Frontends), len(full.Observed.Frontends))
		}
		full.Desired, full.Observed.Frontends, full.Observed.Since, full.Observed.Changed = model.Desired{}, nil, 0, nil
		if len(full.Observed.Warnings) == 0 {
			full.Observed.Warnings = sum.Observed.Warnings // nil and empty alike
		}
		if !reflect.DeepEqual(sum, full) {
			t.Fatalf("%s: SummaryState differs from State without frontends:\n%+v\n%+v", what, sum, full)
		}
	})
}
