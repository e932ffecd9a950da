package rst

import (
	"context"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/deletions"
	"github.com/netdrift/netdrift/internal/testutil/wait"
	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/netdrift/netdrift/internal/model"
)

func newTestPipeline(t *testing.T, svcs Services) (*Pipeline, *fakeProbe, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	mono := fakeMono(clk)
	fp := newFakeProbe(mono)
	p := NewPipeline(PipelineConfig{Probe: fp, Services: svcs, Window: time.Minute, Clock: clk, Mono: mono, Settle: 10 * time.Second,
		Deletions: deletions.New(0)})
	t.Cleanup(func() { p.Close() })
	return p, fp, clk
}

// fakeMono is a kernel clock that reads the fake clock.
func fakeMono(clk *clocktesting.FakeClock) func() uint64 {
	return func() uint64 { return uint64(clk.Now().UnixNano()) }
}

// metricTotals gathers netdrift_terminating_rsts_total from m by "namespace/service".
func metricTotals(t *testing.T, m prometheus.Collector) map[string]uint64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "netdrift_terminating_rsts_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			lb := map[string]string{}
			for _, l := range s.GetLabel() {
				lb[l.GetName()] = l.GetValue()
			}
			out[lb["namespace"]+"/"+lb["service"]] = uint64(s.GetCounter().GetValue())
		}
	}
	return out
}

func snapshotTotals(s Snapshot) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range s.Totals {
		out[k.String()] = v
	}
	return out
}

// TestPipelineOneCount: the kernel's counts, attributed to the service,
// are what Snapshot and the metrics report, including the resets counted
// until the address is unwatched at the window's end.
func TestPipelineOneCount(t *testing.T) {
	p, fp, clk := newTestPipeline(t, fakeServices{webIP4: "web"})
	m := NewMetrics(p, 10)
	p.OnPod(webPod(testDeletions(p), t0, time.Time{}, false))
	if !fp.isWatched(webIP4) || !fp.isWatched(webIP6) {
		t.Fatal("a live pod is not watched")
	}
	p.OnPod(webPod(testDeletions(p), t0, t0, false))
	fp.reset(webIP4, 5)
	fp.reset(webIP6, 2) // not an endpoint of a known service
	want := map[string]uint64{"shop/web": 5, "shop/_unknown": 2}
	if got := snapshotTotals(p.Snapshot()); !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot totals %v, want %v", got, want)
	}
	if got := metricTotals(t, m); !reflect.DeepEqual(got, want) {
		t.Errorf("metric totals %v, want %v", got, want)
	}

	clk.Step(10 * time.Second)
	p.OnPod(webPod(testDeletions(p), clk.Now(), t0, true))
	fp.reset(webIP4, 3) // after the pod is gone, within the window: counted
	clk.Step(time.Minute)
	wait.For(t, 5*time.Second, "the address unwatched at the window's end", func() bool { return !fp.isWatched(webIP4) })
	fp.reset(webIP4, 100) // not watched any more
	want["shop/web"] = 8
	s := p.Snapshot()
	if got := snapshotTotals(s); !reflect.DeepEqual(got, want) {
		t.Errorf("after expiry: totals %v, want %v (the last resets attributed to the pod's service)", got, want)
	}
	if got := metricTotals(t, m); !reflect.DeepEqual(got, want) {
		t.Errorf("after expiry: metric totals %v, want %v", got, want)
	}
	if len(s.Watched) != 0 {
		t.Errorf("watched %v after expiry", s.Watched)
	}
}

// TestPipelineAddressReused: a pod that takes a terminating pod's address
// ends its watch; what was counted stays with the old pod's service, the new
// pod's resets are its own.
func TestPipelineAddressReused(t *testing.T) {
	p, fp, _ := newTestPipeline(t, fakeServices{webIP4: "web"})
	p.OnPod(webPod(testDeletions(p), t0, t0, true))
	fp.reset(webIP4, 4)
	p.OnPod(PodChange{Name: "blog/b-1", IPs: []netip.Addr{webIP4}, At: t0.Add(time.Second)})
	fp.reset(webIP4, 9)
	s := p.Snapshot()
	if got := snapshotTotals(s); !reflect.DeepEqual(got, map[string]uint64{"shop/web": 4}) {
		t.Errorf("totals %v, want shop/web 4", got)
	}
	if s.Unsettled != 9 {
		t.Errorf("unsettled %d, want the new pod's 9", s.Unsettled)
	}
}

// TestPipelineWatchFails: an address the probe refuses is not listed.
func TestPipelineWatchFails(t *testing.T) {
	p, fp, _ := newTestPipeline(t, nil)
	fp.full = true
	p.OnPod(webPod(testDeletions(p), t0, time.Time{}, false))
	if s := p.Snapshot(); len(s.Watched) != 0 {
		t.Errorf("watched %v though the probe refused", s.Watched)
	}
}

// TestPipelineSamples: ring buffer events become attributed samples, the
// newest MaxSamples kept; the probe's drops are reported beside them.
func TestPipelineSamples(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	fp := newFakeProbe(fakeMono(clk))
	fp.stats = Stats{EventsRateLimited: 40, EventsLost: 1}
	p := NewPipeline(PipelineConfig{Probe: fp, Services: fakeServices{webIP4: "web"}, Window: time.Minute, Clock: clk,
		Mono: fakeMono(clk), MaxSamples: 2, Deletions: deletions.New(0)})
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	p.OnPod(webPod(testDeletions(p), t0, t0, false))
	for i := range 3 {
		fp.events <- Event{Time: t0.Add(time.Duration(i+1) * time.Second), Direction: SentBy, Reason: "NO_SOCKET",
			Sender: netip.AddrPortFrom(webIP4, 8080), Peer: netip.MustParseAddrPort("10.244.2.7:40312")}
	}
	var s Snapshot
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if s = p.Snapshot(); s.Sampling.Evicted == 1 && len(s.Samples) == 2 && s.Samples[1].Service == (model.ServiceName{Namespace: "shop", Name: "web"}) {
			break
		}
	}
	if len(s.Samples) != 2 || s.Sampling.Evicted != 1 {
		t.Fatalf("samples %+v, sampling %+v: want the newest 2 of 3", s.Samples, s.Sampling)
	}
	r := s.Samples[1]
	if r.Pod != "web-1" || r.Service != (model.ServiceName{Namespace: "shop", Name: "web"}) || r.SecondsSinceDeletion == nil || *r.SecondsSinceDeletion != 3 {
		t.Errorf("sample %+v", r)
	}
	want := Sampling{PerSecondPerCPU: 100, Max: 2, RateLimited: 40, RingFull: 1, Evicted: 1}
	if s.Sampling != want {
		t.Errorf("sampling %+v, want %+v", s.Sampling, want)
	}
}

// TestOpenProbeDisabled: --no-rst-probe gives a probe that says so.
func TestOpenProbeDisabled(t *testing.T) {
	p := NewPipeline(PipelineConfig{Probe: OpenProbe("", "disabled by --no-rst-probe", nil), Deletions: deletions.New(0)})
	p.OnPod(webPod(testDeletions(p), t0, t0, false))
	s := p.Snapshot()
	if s.Status.Up || s.Status.Reason != "disabled by --no-rst-probe" || len(s.Watched) != 0 {
		t.Errorf("snapshot %+v", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	p.Run(ctx) // returns at ctx's end though the probe has no events
}

// TestPipelineLateDeletion: a pod is watched while live; resets sent after
// its deletion request but before the agent learns of it are settled as the
// terminating pod's as soon as the request is delivered, those before it as
// ready once the settle delay passes; a Ready endpoint's resets on its
// Service's port are refusals, on another port not.
func TestPipelineLateDeletion(t *testing.T) {
	p, fp, clk := newTestPipeline(t, fakeServices{webIP4: "web"})
	m := NewMetrics(p, 10)
	p.OnPod(webPod(testDeletions(p), t0, time.Time{}, false))
	p.Snapshot() // resolves the endpoint ports
	clk.Step(time.Second)
	fp.resetPort(webIP4, 8080, 5) // refused while Ready
	fp.resetPort(webIP4, 9999, 2) // another port
	clk.Step(time.Second)
	requested := clk.Now()
	clk.Step(500 * time.Millisecond)
	fp.resetPort(webIP4, 8080, 7) // after the request, before its delivery
	s := p.Snapshot()
	if len(s.Totals) != 0 || s.Unsettled != 14 {
		t.Fatalf("before the delivery: totals %v unsettled %d, want none and 14", s.Totals, s.Unsettled)
	}
	clk.Step(time.Second)
	p.OnPod(webPod(testDeletions(p), clk.Now(), requested, false))
	fp.resetPort(webIP4, 8080, 3) // the kernel knows now
	s = p.Snapshot()
	if got := snapshotTotals(s); !reflect.DeepEqual(got, map[string]uint64{"shop/web": 10}) || s.Unsettled != 7 {
		t.Errorf("after the delivery: totals %v unsettled %d, want shop/web 10 (7 late + 3) and 7", got, s.Unsettled)
	}
	clk.Step(11 * time.Second)
	s = p.Snapshot()
	want := StateCounts{Ready: 7, Terminating: 10, ReadyRefusals: 5, TerminatingRefusals: 10}
	if got := s.ByState[model.ServiceName{Namespace: "shop", Name: "web"}]; got != want || s.Unsettled != 0 {
		t.Errorf("settled: %+v unsettled %d, want %+v", got, s.Unsettled, want)
	}
	if got := metricTotals(t, m); !reflect.DeepEqual(got, map[string]uint64{"shop/web": 10}) {
		t.Errorf("metric totals %v", got)
	}
}
