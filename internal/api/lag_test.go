package api_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/agent/agenttest"
	"github.com/netdrift/netdrift/internal/api"
)

// TestLagSince: ?since keeps the samples delivered at or after it, and the
// percentiles are over those; a malformed time is refused with what to send.
func TestLagSince(t *testing.T) {
	st := agenttest.State()
	h := api.NewHandler(func() agent.State { return st }, prometheus.NewRegistry(), api.Providers{})
	since := agenttest.Now.Add(-2 * time.Minute) // the kube-dns sample's T1
	code, _, body := get(t, h, "GET", "/v1/lag?since="+url.QueryEscape(since.Format(time.RFC3339Nano)))
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var l api.Lag
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range l.Samples {
		got = append(got, s.Service)
	}
	if strings.Join(got, ",") != "kube-system/kube-dns,shop/cart" {
		t.Errorf("samples since %s: %v, want kube-system/kube-dns,shop/cart", since, got)
	}
	if n := l.NodeLag["all"].Count; n != 2 {
		t.Errorf("node_lag all counts %d samples, want the 2 listed", n)
	}
	if len(st.Recent) != 4 {
		t.Fatalf("the fixture has %d samples, want 4", len(st.Recent))
	}

	code, _, body = get(t, h, "GET", "/v1/lag?since=yesterday")
	if code != 400 || !strings.Contains(string(body), "RFC 3339") {
		t.Errorf("since=yesterday: status %d %q, want 400 naming the format", code, body)
	}
}

// TestLagUsesTheLagProvider: /v1/lag asks Providers.Lag, not the full
// state, when it is set (the agent's LagState copies no desired or observed
// state).
func TestLagUsesTheLagProvider(t *testing.T) {
	st := agenttest.State()
	full := func() agent.State {
		t.Error("/v1/lag asked for the full state with a Lag provider set")
		return st
	}
	h := api.NewHandler(full, prometheus.NewRegistry(), api.Providers{Lag: func() agent.State { return st }})
	code, _, body := get(t, h, "GET", "/v1/lag")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var l api.Lag
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Samples) != len(st.Recent) || len(l.Samples) == 0 {
		t.Errorf("%d samples, want the provider's %d", len(l.Samples), len(st.Recent))
	}
}

// TestSummaryHandlersUseTheSummaryProvider: /readyz, /v1/status, /v1/drift
// and /v1/rsts read the summary state when one is provided, never the full
// state (which copies the frontend maps).
func TestSummaryHandlersUseTheSummaryProvider(t *testing.T) {
	st := agenttest.State()
	full := func() agent.State {
		t.Error("a summary handler asked for the full state with a Summary provider set")
		return st
	}
	asked := 0
	h := api.NewHandler(full, prometheus.NewRegistry(), api.Providers{RSTs: fixedRSTs{}, Summary: func() agent.State { asked++; return st }})
	for _, path := range []string{"/readyz", "/v1/status", "/v1/drift", "/v1/rsts"} {
		before := asked
		if code, _, body := get(t, h, "GET", path); code != 200 {
			t.Errorf("%s: status %d: %s", path, code, body)
		}
		if asked == before {
			t.Errorf("%s did not read the summary state", path)
		}
	}
}
