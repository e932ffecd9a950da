package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLogRuns: the current run is the log from the last recorded start,
// --previous the run before it, and with one run --previous is the
// kubelet's "not found".
func TestLogRuns(t *testing.T) {
	dir := t.TempDir()
	s := &logServer{file: filepath.Join(dir, "agent.log")}
	first, second := "run 1 line a\nrun 1 line b\n", "run 2 line a\nrun 2 line b\nrun 2 line c\n"
	get := func(query string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, "/containerLogs/netdrift/p/agent?"+query, nil)
		req.SetPathValue("ns", "netdrift")
		req.SetPathValue("pod", "p")
		req.SetPathValue("container", "agent")
		w := httptest.NewRecorder()
		s.serve(w, req)
		return w.Code, w.Body.String()
	}
	write := func(log, runs string) {
		if err := os.WriteFile(s.file, []byte(log), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.runsFile(), []byte(runs), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(first, "0\n")
	if code, body := get(""); code != 200 || body != first {
		t.Errorf("one run: %d %q", code, body)
	}
	if code, body := get("previous=true"); code != 400 || !strings.Contains(body, `previous terminated container "agent" in pod "p" not found`) {
		t.Errorf("one run, --previous: %d %q", code, body)
	}
	write(first+second, "0\n"+strconv.Itoa(len(first))+"\n")
	if code, body := get(""); code != 200 || body != second {
		t.Errorf("current: %d %q, want %q", code, body, second)
	}
	if code, body := get("previous=true"); code != 200 || body != first {
		t.Errorf("previous: %d %q, want %q", code, body, first)
	}
	if code, body := get("tailLines=1"); code != 200 || body != "run 2 line c\n" {
		t.Errorf("tailLines=1: %d %q", code, body)
	}
	if code, body := get("limitBytes=5"); code != 200 || body != "run 2" {
		t.Errorf("limitBytes=5: %d %q", code, body)
	}
	if code, body := get("timestamps=true"); code != 400 || !strings.Contains(body, "timestamps: not supported") {
		t.Errorf("timestamps: %d %q", code, body)
	}
	req := httptest.NewRequest(http.MethodGet, "/containerLogs/default/web/app", nil)
	req.SetPathValue("pod", "web")
	req.SetPathValue("container", "app")
	w := httptest.NewRecorder()
	s.serve(w, req)
	if w.Code != 404 || !strings.Contains(w.Body.String(), "only of the netdrift agent's container") {
		t.Errorf("another container: %d %q", w.Code, w.Body.String())
	}
}
