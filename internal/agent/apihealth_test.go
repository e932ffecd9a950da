package agent

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAPIHealthLogsFirstFailureThenRateLimited: the first failure is
// logged at once, later ones at most once per APILogEvery with the count
// of those not logged, and the recovery once.
func TestAPIHealthLogsFirstFailureThenRateLimited(t *testing.T) {
	now := t0
	var buf bytes.Buffer
	h := NewAPIHealth(func() time.Time { return now }, slog.New(slog.NewTextHandler(&buf, nil)))
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	h.Failed(refused)
	if n := strings.Count(buf.String(), "API server request failed"); n != 1 || !strings.Contains(buf.String(), "connection refused") {
		t.Fatalf("after the first failure, log %q; want it logged at once", buf.String())
	}
	for i := 0; i < 14; i++ { // 28 s of failures every 2 s
		now = now.Add(2 * time.Second)
		h.Failed(refused)
	}
	if n := strings.Count(buf.String(), "API server request failed"); n != 1 {
		t.Fatalf("%d lines within 30 s; want 1: %s", n, buf.String())
	}
	now = now.Add(2 * time.Second) // 30 s after the first
	h.Failed(refused)
	if n := strings.Count(buf.String(), "API server request failed"); n != 2 || !strings.Contains(buf.String(), "not_logged=14") {
		t.Fatalf("at 30 s: %s; want a second line counting 14 not logged", buf.String())
	}
	st := h.State()
	if !st.Failing || !st.FailingSince.Equal(t0) || st.Failures != 16 || st.LastError != refused.Error() {
		t.Fatalf("state %+v; want failing since t0, 16 failures", st)
	}
	now = now.Add(time.Second)
	h.Succeeded()
	h.Succeeded()
	if n := strings.Count(buf.String(), "succeed again"); n != 1 || h.State().Failing {
		t.Fatalf("recovery logged %d times, state %+v: %s", n, h.State(), buf.String())
	}
	if st := h.State(); st.LastError == "" {
		t.Fatal("the last error is forgotten on recovery; it should stay for the view")
	}
}

// TestAPIHealthTransportClassifies: over a real HTTP server, a 200 is a
// success, a 403 and a refused dial are failures, a POST and a 404 are
// neither.
func TestAPIHealthTransportClassifies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/forbidden":
			http.Error(w, "forbidden", http.StatusForbidden)
		case "/missing":
			http.NotFound(w, r)
		default:
			_, _ = w.Write([]byte("{}"))
		}
	}))
	defer srv.Close()
	h := NewAPIHealth(time.Now, slog.New(slog.DiscardHandler))
	c := &http.Client{Transport: h.Transport(http.DefaultTransport)}
	get := func(url string) {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
		}
	}
	get(srv.URL + "/forbidden")
	if st := h.State(); !st.Failing || !strings.Contains(st.LastError, "403") {
		t.Fatalf("after a 403: %+v", st)
	}
	get(srv.URL + "/missing")
	resp, err := c.Post(srv.URL+"/ok", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !h.State().Failing {
		t.Fatal("a 404 or a POST counted as a success")
	}
	get(srv.URL + "/ok")
	if h.State().Failing {
		t.Fatal("a 200 did not end the failure")
	}
	addr := srv.Listener.Addr().String()
	srv.Close()
	get("http://" + addr + "/ok")
	if st := h.State(); !st.Failing || !strings.Contains(st.LastError, "refused") {
		t.Fatalf("after a refused dial: %+v", st)
	}
}
