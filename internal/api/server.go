package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/drift"
)

// Handler serves the read-only API.
type Handler struct {
	state     func() agent.State
	gather    prometheus.Gatherer
	providers Providers
	mux       *http.ServeMux
}

// NewHandler builds the API over the agent's state and a metrics registry.
func NewHandler(state func() agent.State, gather prometheus.Gatherer, providers Providers) *Handler {
	h := &Handler{state: state, gather: gather, providers: providers, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	h.mux.HandleFunc("GET /readyz", h.readyz)
	h.mux.Handle("GET /metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{}))
	h.mux.HandleFunc("GET /v1/status", h.status)
	h.mux.HandleFunc("GET /v1/drift", h.drift)
	h.mux.HandleFunc("GET /v1/lag", h.lag)
	h.mux.HandleFunc("GET /v1/rsts", h.rsts)
	h.mux.HandleFunc("GET /v1/services/{ns}/{name}", h.service)
	return h
}

// ServeHTTP implements http.Handler; every other method is refused (read-only).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "read-only API: only GET", http.StatusMethodNotAllowed)
		return
	}
	h.mux.ServeHTTP(w, r)
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONStatus(w, http.StatusOK, v) }

// writeJSONStatus sets the content type before the status: headers set
// after WriteHeader are ignored.
func writeJSONStatus(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = EncodeJSON(w, v) // with apiVersion and kind; evidence's "->" and "<" kept readable
}

// summary is the state without its frontend maps, for the handlers that
// show neither (Providers.Summary).
func (h *Handler) summary() agent.State {
	if h.providers.Summary != nil {
		return h.providers.Summary()
	}
	return h.state()
}

func (h *Handler) readyz(w http.ResponseWriter, _ *http.Request) {
	s := h.summary()
	if !s.Ready {
		msg := "not ready: " + s.ReadyReason
		if s.View.LastError != "" {
			msg += "; last error: " + s.View.LastError
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(msg + "\n"))
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

func (h *Handler) status(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, StatusOf(h.summary(), h.providers))
}

// StatusOf builds /v1/status.
func StatusOf(s agent.State, pr Providers) Status {
	st := Status{
		Node: s.Node, Datapath: s.Datapath, DatapathReason: s.DatapathReason,
		Ready: s.Ready, ReadyReason: s.ReadyReason, View: ViewOf(s.View), Converged: s.Converged(),
		Watch: Watch{Synced: s.Watch.Synced, Healthy: s.Watch.Healthy, Reason: s.Watch.HealthReason,
			LastLeaseRenew: s.Watch.LastLeaseRenew, LastDelivery: s.Watch.LastDelivery},
		Sources:                    []Source{},
		Fallbacks:                  FallbacksOf(s.Fallbacks),
		ReaderWarnings:             append([]string{}, s.Observed.Warnings...),
		PendingChanges:             len(s.PendingChanges),
		OldestPendingChangeSeconds: s.OldestPendingChange().Seconds(),
		Findings:                   len(s.Stale),
		PendingMismatches:          len(s.Pending),
		LastAudit:                  s.LastAudit,
		Notes:                      s.Notes,
	}
	if s.Ready {
		st.ReadyReason = ""
	}
	if s.Watch.LeaseSeen {
		d := s.Watch.LeaseDelay.Seconds()
		st.Watch.LeaseDelaySeconds = &d
	}
	for _, src := range s.Sources {
		st.Sources = append(st.Sources, Source{Name: src.Name, Up: src.Up, Error: src.Error, Detail: src.Detail,
			DurationSeconds: src.Duration.Seconds(), LastSuccess: src.LastSuccess})
	}
	if pr.RSTs != nil {
		p := ProbeOf(pr.RSTs.Status())
		st.RSTProbe = &p
	}
	st.RecommendedPreStopSeconds = preStopOf(s)
	if pr.Report != nil {
		r := pr.Report()
		st.Report = &r
	}
	return st
}

// preStopOf is the preStop recommendation from the state's lag samples.
func preStopOf(s agent.State) *float64 {
	if v, ok := drift.RecommendPreStop(s.Recent, s.Now, drift.PreStopWindow); ok {
		return &v
	}
	return nil
}

func (h *Handler) drift(w http.ResponseWriter, _ *http.Request) {
	s := h.summary()
	writeJSON(w, Drift{Node: s.Node, Datapath: s.Datapath, View: ViewOf(s.View),
		Findings: trackedWithConnections(s.Stale, s.Now, h.providers.Hurt),
		Pending:  trackedWithConnections(s.Pending, s.Now, h.providers.Hurt),
		Warnings: s.Observed.Warnings})
}

// lag serves the recent samples; ?since=RFC 3339 time keeps those delivered
// (T1) at or after it, percentiles included: a poller asks only for what it
// has not seen instead of the newest thousand every time.
func (h *Handler) lag(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			http.Error(w, "since: want an RFC 3339 time such as 2026-11-29T14:25:00.18Z, got "+strconv.Quote(v), http.StatusBadRequest)
			return
		}
		since = t
	}
	state := h.providers.Lag
	if state == nil {
		state = h.state
	}
	s := state()
	l := LagOf(s.Node, samplesSince(s.Recent, since), s.PendingChanges, s.Now)
	l.View = ViewOf(s.View)
	writeJSON(w, l)
}

// samplesSince is the samples with T1 at or after since (all when zero).
// Samples are kept in the order they were measured, not by T1: filter all.
func samplesSince(samples []drift.LagSample, since time.Time) []drift.LagSample {
	if since.IsZero() {
		return samples
	}
	var out []drift.LagSample
	for _, s := range samples {
		if !s.T1.Before(since) {
			out = append(out, s)
		}
	}
	return out
}

func (h *Handler) service(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("ns") + "/" + r.PathValue("name")
	if strings.Count(key, "/") != 1 {
		http.Error(w, "want /v1/services/NAMESPACE/NAME", http.StatusBadRequest)
		return
	}
	v := ServiceViewOf(h.state(), key, h.providers)
	code := http.StatusOK
	if !v.Exists && len(v.Frontends) == 0 {
		code = http.StatusNotFound
	}
	writeJSONStatus(w, code, v)
}
