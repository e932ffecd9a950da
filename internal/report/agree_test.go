package report

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/agent/agenttest"
	"github.com/netdrift/netdrift/internal/api"
)

func get(t *testing.T, h http.Handler, path string, v any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatal(err)
	}
}

// A report built from the agent's state says what the agent's own API
// serves from that state: the same findings, counts, view, watch, pending
// changes and lag percentiles.
func TestReportAgreesWithTheAgentAPI(t *testing.T) {
	for name, s := range map[string]agent.State{"findings": agenttest.State(), "blind": agenttest.Blind()} {
		h := api.NewHandler(func() agent.State { return s }, prometheus.NewRegistry(), api.Providers{})
		var st api.Status
		var d api.Drift
		var l api.Lag
		get(t, h, "/v1/status", &st)
		get(t, h, "/v1/drift", &d)
		get(t, h, "/v1/lag", &l)
		nodeLag, samples := LagOf(s)
		r := Build(InputsOf(s), Options{MaxFindings: 200, Now: s.Now, NodeLag: nodeLag, LagSamples: samples})

		if r.FindingsTotal != st.Findings || r.FindingsTotal != len(d.Findings) || len(r.Findings) != len(d.Findings) {
			t.Errorf("%s: report total %d listed %d; /v1/status findings %d, /v1/drift %d", name, r.FindingsTotal, len(r.Findings), st.Findings, len(d.Findings))
		}
		var fromAPI, fromReport []string
		for _, f := range d.Findings {
			fromAPI = append(fromAPI, Identity(f))
		}
		for _, f := range r.Findings {
			fromReport = append(fromReport, Identity(api.Finding{Kind: f.Kind, Service: f.Service, Frontend: f.Frontend, Backend: f.Backend, Subject: f.Subject}))
		}
		sort.Strings(fromAPI)
		sort.Strings(fromReport)
		if len(fromAPI) == 0 && name == "findings" {
			t.Fatalf("%s: the fixture serves no finding: nothing compared", name)
		}
		for i := range fromAPI {
			if i >= len(fromReport) || fromAPI[i] != fromReport[i] {
				t.Fatalf("%s: report findings %v, /v1/drift %v", name, fromReport, fromAPI)
			}
		}
		if r.Datapath != st.Datapath || r.View.Current != st.View.Current || r.View.Code != st.View.Code ||
			r.Watch.Healthy != st.Watch.Healthy || r.Watch.Synced != st.Watch.Synced || r.PendingChanges != st.PendingChanges {
			t.Errorf("%s: report %+v; /v1/status %+v", name, r, st)
		}
		if r.Lag.Samples != len(l.Samples) || len(r.Lag.ByKind) != len(l.NodeLag) {
			t.Errorf("%s: report lag %+v; /v1/lag %d samples, node_lag %v", name, r.Lag, len(l.Samples), l.NodeLag)
		}
		for k, p := range l.NodeLag {
			if got := r.Lag.ByKind[k]; got.Count != p.Count || got.P99 != round3(p.P99) {
				t.Errorf("%s: lag %s: report %+v, /v1/lag %+v", name, k, got, p)
			}
		}
	}
}
