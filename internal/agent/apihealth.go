package agent

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// APILogEvery is how often at most APIHealth logs a failed request: the
// first failure at once, then one line per interval with the number of
// failures not logged since.
const APILogEvery = 30 * time.Second

// APIHealth records how the agent's list and watch requests (GETs) to the
// API server fare: for the view (a failing API is no current view of the
// cluster) and for the log. It sits below client-go's reflectors and below
// the reconnect transport, which holds refused dials and retries them
// without client-go ever seeing an error: without it, an agent that cannot
// reach the API server logs nothing about it.
type APIHealth struct {
	now      func() time.Time
	log      *slog.Logger
	logEvery time.Duration

	mu          sync.Mutex
	st          APIState
	lastLog     time.Time // of the last failure logged
	unlogged    uint64    // failures not logged since lastLog
	loggedSince bool      // a failure of the current streak was logged
}

// NewAPIHealth logs to log (failures at warn, recovery at info) and dates by now.
func NewAPIHealth(now func() time.Time, log *slog.Logger) *APIHealth {
	return &APIHealth{now: now, log: log, logEvery: APILogEvery}
}

// State is how the requests fare now.
func (h *APIHealth) State() APIState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st
}

// Failed records a failed request.
func (h *APIHealth) Failed(err error) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.st.Failing {
		h.st.Failing, h.st.FailingSince, h.st.Failures = true, now, 0
		h.loggedSince = false
	}
	h.st.Failures++
	h.st.LastError, h.st.LastErrorAt = err.Error(), now
	if !h.lastLog.IsZero() && now.Sub(h.lastLog) < h.logEvery {
		h.unlogged++
		return
	}
	h.log.Warn("API server request failed: the watch cache is not kept current", "err", err,
		"failing_since", h.st.FailingSince, "failures", h.st.Failures, "not_logged", h.unlogged)
	h.lastLog, h.unlogged, h.loggedSince = now, 0, true
}

// Succeeded records a request answered.
func (h *APIHealth) Succeeded() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.st.Failing {
		return
	}
	if h.loggedSince {
		h.log.Info("API server requests succeed again", "failed_for", h.now().Sub(h.st.FailingSince).Round(time.Millisecond),
			"failures", h.st.Failures, "last_err", h.st.LastError)
	}
	h.st.Failing, h.st.FailingSince, h.st.Failures = false, time.Time{}, 0
}

// Transport wraps next: every GET's outcome is recorded. A transport
// error or an answer that serves nothing (401, 403, 429, 5xx) is a
// failure, any other answer below 400 a success; a request its caller
// cancelled (the agent stopping, a watch ended) is neither.
func (h *APIHealth) Transport(next http.RoundTripper) http.RoundTripper {
	return apiTransport{h: h, next: next}
}

type apiTransport struct {
	h    *APIHealth
	next http.RoundTripper
}

func (t apiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if req.Method != http.MethodGet {
		return resp, err
	}
	switch {
	case err != nil:
		if req.Context().Err() == nil {
			t.h.Failed(err)
		}
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden ||
		resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		t.h.Failed(fmt.Errorf("GET %s: %s", req.URL.Path, resp.Status))
	case resp.StatusCode < 400:
		t.h.Succeeded()
	}
	return resp, err
}
