package rst_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/deletions"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/rst"
)

// TestFloodTotalsAgree floods a watched pod's closed port with SYNs (far
// beyond the events' rate limit) through its life — Ready, after its deletion
// request but before the agent learns of it, terminating, deleted — and reads
// the agent's API: per state, the RSTs of /metrics, /v1/rsts and
// /v1/services/shop/web are the same number, and it is the pod namespace's
// own Tcp OutRsts increase in that phase; the resets sent after the deletion
// request and before its delivery count as the terminating pod's; the events
// are samples whose drops add up to the total.
func TestFloodTotalsAgree(t *testing.T) {
	rst.RequireProbe(t)
	fp := rst.NewFloodPair(t)
	probe, err := rst.Load(rst.Config{})
	if err != nil {
		t.Fatal(err)
	}
	desired := map[model.Frontend]model.Verdict{
		model.NewFrontend(netip.MustParseAddr("10.96.0.5"), 80, model.TCP, model.ClusterIP): {
			Service: model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "web"}, Port: "http", Protocol: model.TCP}, Action: model.Forward,
			Endpoints: []model.Endpoint{{Addr: netip.AddrPortFrom(fp.Pod4(), 9), Ready: true, Serving: true}}},
	}
	// The settle delay is measured on a clock the test moves forward once
	// every deletion request is delivered: with a wall-clock delay, a loaded
	// machine could take longer than it between the late flood and the
	// delivery of its deletion request, and those resets then settled as
	// Ready (the product's documented behaviour for a watch slower than the
	// delay), not as the terminating pod's the test asserts.
	clk := newShiftedClock()
	dels := deletions.New(0)
	p := rst.NewPipeline(rst.PipelineConfig{Probe: probe, Window: time.Minute, Settle: time.Hour, Clock: clk, Mono: clk.mono,
		Drain: 50 * time.Millisecond, Services: rst.DesiredServices(func() map[model.Frontend]model.Verdict { return desired }),
		Deletions: dels})
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	pod := rst.PodChange{Name: "shop/web-1", IPs: []netip.Addr{fp.Pod4()}, At: time.Now()}
	p.OnPod(pod)
	ready := fp.SYNFlood(t, 9, 5000) // refused while Ready
	time.Sleep(50 * time.Millisecond)
	requested := time.Now()
	time.Sleep(50 * time.Millisecond)
	late := fp.SYNFlood(t, 9, 3000) // after the deletion request, before the agent knows
	pod.At = time.Now()
	dels.Record(pod.Name, pod.IPs, requested, pod.At) // as the agent records the delivery before the pipeline sees it
	p.OnPod(pod)
	term := fp.SYNFlood(t, 9, 5000)
	pod.Deleted, pod.At = true, time.Now()
	p.OnPod(pod)
	gone := fp.SYNFlood(t, 9, 2000)
	sent := ready + late + term + gone
	t.Logf("probe %+v; the pod namespace sent %d RSTs: ready %d, late %d, terminating %d, deleted %d",
		probe.Status(), sent, ready, late, term, gone)

	state := agent.State{Node: "node-a", Ready: true, Now: time.Now(), Desired: model.Desired{Frontends: desired}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(rst.NewMetrics(p, 100))
	srv := httptest.NewServer(api.NewHandler(func() agent.State { return state }, reg, api.Providers{RSTs: p}))
	defer srv.Close()

	var rep api.RSTReport
	// Before the settle delay only the Ready phase's resets wait; the late
	// ones settle as the pod's deletion request is delivered.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		decode(t, get(t, srv.URL+"/v1/rsts"), &rep)
		if rep.Unsettled == ready {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("before the settle delay: %d unsettled, want the %d resets of the Ready phase", rep.Unsettled, ready)
		}
	}
	clk.advance(2 * time.Hour) // past the settle delay: the Ready phase's resets settle
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		decode(t, get(t, srv.URL+"/v1/rsts"), &rep)
		if rep.Unsettled == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("still %d unsettled", rep.Unsettled)
		}
	}
	text := get(t, srv.URL+"/metrics")
	metric := metricValue(t, text, `netdrift_terminating_rsts_total{namespace="shop",service="web"}`)
	mstate := func(st string) uint64 {
		return metricValue(t, text, `netdrift_endpoint_rsts_total{namespace="shop",service="web",state="`+st+`"}`)
	}
	refused := metricValue(t, text, `netdrift_ready_endpoint_refusals_total{namespace="shop",service="web"}`)
	decode(t, get(t, srv.URL+"/v1/rsts"), &rep)
	var view api.ServiceView
	decode(t, get(t, srv.URL+"/v1/services/shop/web"), &view)
	if view.RSTs == nil {
		t.Fatal("/v1/services/shop/web has no rsts")
	}
	by := rep.ByState["shop/web"]
	t.Logf("/metrics terminating_rsts %d, endpoint_rsts ready %d terminating %d deleted %d, refusals %d; /v1/rsts %d %+v; "+
		"/v1/services %+v; event samples %d %+v", metric, mstate("ready"), mstate("terminating"), mstate("deleted"), refused,
		rep.Totals["shop/web"], by, *view.RSTs, len(rep.Events), rep.EventSamples)
	hurt := late + term + gone
	want := rst.StateCounts{Ready: ready, Terminating: late + term, Deleted: gone, ReadyRefusals: ready, TerminatingRefusals: hurt}
	if ready == 0 || late == 0 || term == 0 || gone == 0 {
		t.Fatalf("a phase sent no RSTs")
	}
	if by != want || len(rep.ByState) != 1 {
		t.Errorf("/v1/rsts by state %v, want shop/web %+v", rep.ByState, want)
	}
	if metric != hurt || rep.Totals["shop/web"] != hurt || view.RSTs.Total != hurt || len(rep.Totals) != 1 {
		t.Errorf("terminating RSTs: sent %d, /metrics %d, /v1/rsts %v, /v1/services %d: want all equal", hurt, metric, rep.Totals, view.RSTs.Total)
	}
	if mstate("ready") != ready || mstate("terminating") != late+term || mstate("deleted") != gone || refused != ready {
		t.Errorf("/metrics by state: ready %d terminating %d deleted %d refusals %d, want %+v", mstate("ready"),
			mstate("terminating"), mstate("deleted"), refused, want)
	}
	v := view.RSTs
	if v.Ready != ready || v.Terminating != late+term || v.Deleted != gone || v.ReadyRefusals != ready {
		t.Errorf("/v1/services rsts %+v, want %+v", *v, want)
	}
	if rep.EventSamples.DroppedRateLimited == 0 {
		t.Errorf("no event rate-limited in a flood of %d: %+v", sent, rep.EventSamples)
	}
	// Every RST was either sampled or dropped (the sampler may still be draining).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		decode(t, get(t, srv.URL+"/v1/rsts"), &rep)
		s := rep.EventSamples
		if got := uint64(len(rep.Events)) + s.Evicted + s.DroppedRateLimited + s.DroppedRingFull; got == sent {
			break
		} else if time.Now().After(deadline) {
			t.Errorf("samples %d + evicted + dropped %+v = %d, want %d", len(rep.Events), s, got, sent)
			break
		}
	}
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v: %s", url, resp.Status, err, b)
	}
	return b
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

// metricValue finds one series' value in a text exposition.
func metricValue(t *testing.T, text []byte, series string) uint64 {
	t.Helper()
	for _, line := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return uint64(f)
		}
	}
	t.Fatalf("no %s in /metrics:\n%s", series, text)
	return 0
}

// shiftedClock is the real clock and the kernel's monotonic clock, both
// moved forward by the same amount when the test advances them: API times
// map to the kernel's clock as on the real clocks, and the settle delay
// passes when the test says.
type shiftedClock struct {
	clock.RealClock
	shift *atomic.Int64
}

func newShiftedClock() shiftedClock { return shiftedClock{shift: new(atomic.Int64)} }

func (c shiftedClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.shift.Load())) }
func (c shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c shiftedClock) mono() uint64                    { return rst.MonoNow() + uint64(c.shift.Load()) }
func (c shiftedClock) advance(d time.Duration)         { c.shift.Add(int64(d)) }
