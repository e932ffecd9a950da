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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/rst"
)

// TestFloodTotalsAgree floods a watched terminating pod's closed port with
// SYNs (far beyond the events' rate limit) and reads the agent's API: the
// RSTs of /metrics, /v1/rsts and /v1/services/shop/web are the same
// number, and it is the pod namespace's own Tcp OutRsts increase; the
// events are samples whose drops add up to that number.
func TestFloodTotalsAgree(t *testing.T) {
	rst.RequireProbe(t)
	fp := rst.NewFloodPair(t)
	probe, err := rst.Load(rst.Config{})
	if err != nil {
		t.Fatal(err)
	}
	desired := map[model.Frontend]model.Verdict{
		model.NewFrontend(netip.MustParseAddr("10.96.0.5"), 80, model.TCP, model.ClusterIP): {
			Service: model.ServicePort{Namespace: "shop", Name: "web", Port: "http", Protocol: model.TCP}, Action: model.Forward,
			Endpoints: []model.Endpoint{{Addr: netip.AddrPortFrom(fp.Pod4(), 9), Terminating: true}}},
	}
	p := rst.NewPipeline(rst.PipelineConfig{Probe: probe, Window: time.Minute,
		Services: rst.DesiredServices(func() map[model.Frontend]model.Verdict { return desired })})
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	now := time.Now()
	p.OnPod(rst.PodChange{Name: "shop/web-1", IPs: []netip.Addr{fp.Pod4()}, DeletionRequested: now, At: now})
	sent := fp.SYNFlood(t, 9, 20000)
	t.Logf("probe %+v; the pod namespace sent %d RSTs", probe.Status(), sent)

	state := agent.State{Node: "node-a", Ready: true, Now: time.Now(), Desired: model.Desired{Frontends: desired}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(rst.NewMetrics(p, 100))
	srv := httptest.NewServer(api.NewHandler(func() agent.State { return state }, reg, api.Providers{RSTs: p}))
	defer srv.Close()

	metric := metricValue(t, get(t, srv.URL+"/metrics"), `netdrift_terminating_rsts_total{namespace="shop",service="web"}`)
	var rep api.RSTReport
	decode(t, get(t, srv.URL+"/v1/rsts"), &rep)
	var view api.ServiceView
	decode(t, get(t, srv.URL+"/v1/services/shop/web"), &view)
	if view.RSTs == nil {
		t.Fatal("/v1/services/shop/web has no rsts")
	}
	t.Logf("/metrics %d, /v1/rsts %d, /v1/services %d, event samples %d %+v", metric, rep.Totals["shop/web"],
		view.RSTs.Total, len(rep.Events), rep.EventSamples)
	if sent == 0 || metric != sent || rep.Totals["shop/web"] != sent || view.RSTs.Total != sent || len(rep.Totals) != 1 {
		t.Errorf("RSTs: sent %d, /metrics %d, /v1/rsts %v, /v1/services %d: want all equal", sent, metric, rep.Totals, view.RSTs.Total)
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
