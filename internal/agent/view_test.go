package agent

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func healthyWatch() WatchStatus {
	return WatchStatus{Synced: true, Healthy: true, HealthReason: "Lease renewals arrive"}
}

func goodRead() readState {
	var r readState
	r.record(t0, "", "")
	return r
}

// TestViewJudgedInOrder: each cause alone makes the view not current with
// its code, and a failing API wins over what it explains.
func TestViewJudgedInOrder(t *testing.T) {
	failing := APIState{Failing: true, FailingSince: t0, Failures: 4, LastError: "dial tcp 127.0.0.1:1: connect: connection refused", LastErrorAt: t0}
	var noRead, failed, none readState
	failed.record(t0, "iptables-save: exit status 4", "")
	none.record(t0, "", "no KUBE-SERVICES chain")
	for _, c := range []struct {
		name    string
		in      viewInput
		code    string
		lastErr string
		reason  string
	}{
		{"api failing", viewInput{watch: WatchStatus{SyncReason: "waiting for caches to sync: lease"}, api: failing, read: noRead},
			ViewAPIFailing, failing.LastError, "4 failed since 2026-12-05T12:00:00Z"},
		{"not synced", viewInput{watch: WatchStatus{SyncReason: "waiting for caches to sync: lease"}, read: goodRead()},
			ViewNotSynced, "", "waiting for caches to sync: lease"},
		{"watch unhealthy", viewInput{watch: WatchStatus{Synced: true, HealthReason: "no Lease renewal delivered for 30s"}, read: goodRead()},
			ViewWatchUnhealthy, "", "no Lease renewal delivered"},
		{"no read yet", viewInput{watch: healthyWatch(), read: noRead}, ViewStarting, "", "no datapath read"},
		{"no kube-proxy state", viewInput{watch: healthyWatch(), read: none}, ViewNoDatapath, "", "no KUBE-SERVICES chain"},
		{"read failed", viewInput{watch: healthyWatch(), read: failed}, ViewReadFailed, "iptables-save: exit status 4", "read failed"},
	} {
		v, _ := judgeView(c.in)
		if v.Current || v.Code != c.code || v.LastError != c.lastErr || !strings.Contains(v.Reason, c.reason) {
			t.Errorf("%s: %+v; want code %s, last error %q, reason with %q", c.name, v, c.code, c.lastErr, c.reason)
		}
	}
	if v, _ := judgeView(viewInput{watch: healthyWatch(), read: goodRead()}); !v.Current || v.Code != "" || v.Reason != "" {
		t.Errorf("synced, healthy, read: %+v; want current", v)
	}
}

// TestViewTrackerSince: since stays while the view stays (not) current,
// moves to the cause's start when it is known, else to the time judged.
func TestViewTrackerSince(t *testing.T) {
	tr := newViewTracker(t0)
	notSynced := viewInput{watch: WatchStatus{SyncReason: "waiting for caches to sync: lease"}}
	v, changed := tr.update(t0.Add(time.Second), notSynced)
	if v.Current || changed || !v.Since.Equal(t0) {
		t.Fatalf("starting, not synced: %+v changed %v; want not current since the start", v, changed)
	}
	good := viewInput{watch: healthyWatch(), read: goodRead()}
	if v, changed = tr.update(t0.Add(3*time.Second), good); !v.Current || !changed || !v.Since.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("caught up: %+v changed %v; want current since 3 s", v, changed)
	}
	if v, changed = tr.update(t0.Add(9*time.Second), good); !v.Current || changed || !v.Since.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("still current: %+v changed %v; want since kept", v, changed)
	}
	// The API fails from 10 s; the loop judges at 12 s: since is 10 s.
	down := good
	down.api = APIState{Failing: true, FailingSince: t0.Add(10 * time.Second), Failures: 2, LastError: "connection refused",
		LastErrorAt: t0.Add(11 * time.Second)}
	if v, changed = tr.update(t0.Add(12*time.Second), down); v.Current || !changed || v.Code != ViewAPIFailing ||
		!v.Since.Equal(t0.Add(10*time.Second)) || v.LastError != "connection refused" {
		t.Fatalf("API failing: %+v changed %v; want not current since 10 s with the error", v, changed)
	}
	// Requests succeed again but the caches relist: still blind, since kept,
	// and the API's error (from this blind spell) still shown.
	relist := viewInput{watch: WatchStatus{SyncReason: "waiting for caches to sync: pod"}, read: goodRead(),
		api: APIState{LastError: "connection refused", LastErrorAt: t0.Add(11 * time.Second)}}
	if v, changed = tr.update(t0.Add(13*time.Second), relist); v.Current || changed || v.Code != ViewNotSynced ||
		!v.Since.Equal(t0.Add(10*time.Second)) || v.LastError != "connection refused" {
		t.Fatalf("relisting: %+v changed %v; want not synced since 10 s", v, changed)
	}
	if v, _ = tr.update(t0.Add(14*time.Second), good); !v.Current {
		t.Fatalf("back: %+v", v)
	}
	// A later unhealthy watch does not show the old API error.
	old := viewInput{watch: WatchStatus{Synced: true, HealthReason: "no Lease renewal delivered for 26s"}, read: goodRead(),
		api: APIState{LastError: "connection refused", LastErrorAt: t0.Add(11 * time.Second)}}
	if v, _ = tr.update(t0.Add(60*time.Second), old); v.Current || v.LastError != "" || !v.Since.Equal(t0.Add(60*time.Second)) {
		t.Fatalf("watch unhealthy later: %+v; want no stale error, since now", v)
	}
}

// TestReadStateFailingSince: the first failed read after a good one dates
// the failure; later failures keep it.
func TestReadStateFailingSince(t *testing.T) {
	var r readState
	r.record(t0, "", "")
	r.record(t0.Add(time.Second), "exit status 1", "")
	r.record(t0.Add(2*time.Second), "exit status 1", "")
	if r.ok || !r.failingSince.Equal(t0.Add(time.Second)) {
		t.Fatalf("%+v; want failing since 1 s", r)
	}
	r.record(t0.Add(3*time.Second), "", "")
	if !r.ok || r.err != "" {
		t.Fatalf("%+v; want ok", r)
	}
}
