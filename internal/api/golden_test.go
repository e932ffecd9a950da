package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/agent/agenttest"
	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/metrics"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/rst"
	"github.com/netdrift/netdrift/internal/testutil/golden"
)

// fixedRSTs is an RST pipeline serving a fixed snapshot: a probe, 3 RSTs
// counted for shop/web and one sampled event.
type fixedRSTs struct{}

func (fixedRSTs) Status() rst.Status {
	return rst.Status{Up: true, Mode: rst.ModeTracepoint, Reason: "tracepoint tcp/tcp_send_reset has the >= 6.10 layout (fires for resets sent without a socket)"}
}

func (f fixedRSTs) Snapshot() rst.Snapshot {
	since := 1.25
	return rst.Snapshot{
		Status:  f.Status(),
		Watched: []netip.Addr{netip.MustParseAddr("10.244.1.13")},
		Totals:  map[model.ServiceName]uint64{{Namespace: "shop", Name: "web"}: 3},
		ByState: map[model.ServiceName]rst.StateCounts{{Namespace: "shop", Name: "web"}: {Ready: 701, Terminating: 2, Deleted: 1,
			ReadyRefusals: 700}},
		Unsettled: 1,
		Samples: []rst.Record{{Time: agenttest.Now.Add(-9 * time.Second), Direction: "sent_by_watched",
			Reason: "NO_SOCKET", Watched: "10.244.1.13:8080", Client: "10.244.2.7:40312",
			Namespace: "shop", Pod: "web-7d9c-x2k4p", Service: model.ServiceName{Namespace: "shop", Name: "web"}, SecondsSinceDeletion: &since}},
		Sampling: rst.Sampling{PerSecondPerCPU: 100, Max: 1000, RateLimited: 2},
	}
}

func providers() api.Providers { return api.Providers{RSTs: fixedRSTs{}} }

// registry holds the metrics a running agent exports, over a fixed state:
// the Recorder fed the state's lag samples and two watch delays, and the
// Collector. No go_/process_ collectors: they vary by machine.
func registry(state func() agent.State, maxSeries int) *prometheus.Registry {
	rec := metrics.NewRecorder()
	for _, s := range agenttest.Samples() {
		rec.ObserveLag(s)
	}
	rec.ObserveWatchDelay("lease", 35*time.Millisecond)
	rec.ObserveWatchDelay("endpointslice", 800*time.Millisecond)
	reg := prometheus.NewRegistry()
	reg.MustRegister(rec.Collectors()...)
	reg.MustRegister(metrics.NewCollector(state, "v0.1.0-test", maxSeries))
	return reg
}

func get(t *testing.T, h http.Handler, method, path string) (int, string, []byte) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// TestHandlerGolden serves every endpoint over the fixed state through
// httptest and compares status, content type and body with golden files.
func TestHandlerGolden(t *testing.T) {
	ready := agenttest.State()
	starting := agenttest.Blind()
	full := api.NewHandler(func() agent.State { return ready }, registry(func() agent.State { return ready }, 100), providers())
	bare := api.NewHandler(func() agent.State { return ready }, prometheus.NewRegistry(), api.Providers{})
	notReady := api.NewHandler(func() agent.State { return starting }, prometheus.NewRegistry(), api.Providers{})
	cases := []struct {
		golden string
		h      http.Handler
		method string
		path   string
		code   int
		ctype  string
	}{
		{"healthz.golden", full, "GET", "/healthz", 200, "text/plain"},
		{"readyz.golden", full, "GET", "/readyz", 200, "text/plain"},
		{"readyz-starting.golden", notReady, "GET", "/readyz", 503, "text/plain"},
		{"status.json.golden", full, "GET", "/v1/status", 200, "application/json"},
		{"status-starting.json.golden", notReady, "GET", "/v1/status", 200, "application/json"},
		{"drift.json.golden", full, "GET", "/v1/drift", 200, "application/json"},
		{"drift-blind.json.golden", notReady, "GET", "/v1/drift", 200, "application/json"},
		{"lag.json.golden", full, "GET", "/v1/lag", 200, "application/json"},
		{"service-web.json.golden", full, "GET", "/v1/services/shop/web", 200, "application/json"},
		{"service-cart.json.golden", full, "GET", "/v1/services/shop/cart", 200, "application/json"},
		{"service-unknown.json.golden", full, "GET", "/v1/services/shop/nope", 404, "application/json"},
		{"rsts.json.golden", full, "GET", "/v1/rsts", 200, "application/json"},
		{"rsts-absent.json.golden", bare, "GET", "/v1/rsts", 503, "application/json"},
		{"metrics.golden", full, "GET", "/metrics", 200, "text/plain"},
		{"post-refused.golden", full, "POST", "/v1/status", 405, "text/plain"},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			code, ctype, body := get(t, c.h, c.method, c.path)
			if code != c.code {
				t.Errorf("%s %s: status %d, want %d", c.method, c.path, code, c.code)
			}
			if !strings.HasPrefix(ctype, c.ctype) {
				t.Errorf("%s %s: content type %q, want %s", c.method, c.path, ctype, c.ctype)
			}
			golden.Check(t, filepath.Join("testdata", c.golden), body)
		})
	}
}
