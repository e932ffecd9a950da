package agent

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/model"
)

// TestLoopBlindUntilSyncedAndRead: an agent whose caches have not synced
// is not ready and says why, from its start; once synced and read it is.
func TestLoopBlindUntilSyncedAndRead(t *testing.T) {
	failing := APIState{}
	h := newHarnessWith(t, func(c *Config) { c.API = func() APIState { return failing } })
	h.c.synced = false
	failing = APIState{Failing: true, FailingSince: start, Failures: 1, LastError: "dial tcp 127.0.0.1:1: connect: connection refused",
		LastErrorAt: start}
	h.advance(time.Second)
	s := h.a.State()
	if s.Ready || s.View.Current || s.View.Code != ViewAPIFailing || !s.View.Since.Equal(start) ||
		!strings.Contains(s.View.LastError, "connection refused") || s.ReadyReason != s.View.Reason {
		t.Fatalf("unreachable API: ready %v view %+v reason %q", s.Ready, s.View, s.ReadyReason)
	}
	if l := h.a.LagState(); l.View.Current || l.View.Code != ViewAPIFailing {
		t.Fatalf("lag state view %+v; want the same blind view", l.View)
	}
	failing = APIState{LastError: failing.LastError, LastErrorAt: start}
	h.c.synced = true
	h.start()
	if s := h.a.State(); !s.Ready || !s.View.Current || !s.View.Since.Equal(start.Add(time.Second)) {
		t.Fatalf("synced and read: ready %v view %+v", s.Ready, s.View)
	}
}

// TestLoopBlindWhileReadsFail: a failed datapath read makes the view not
// current with the read's error, since the failed read; a good one ends it.
func TestLoopBlindWhileReadsFail(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.src.set(model.Observed{}, errors.New("iptables-save: exit status 4"))
	h.advance(11 * time.Second)
	failedAt := h.clk.Now()
	h.advance(11 * time.Second)
	s := h.a.State()
	if s.Ready || s.View.Code != ViewReadFailed || s.View.LastError != "iptables-save: exit status 4" || !s.View.Since.Equal(failedAt) {
		t.Fatalf("reads failing: ready %v view %+v; want read failed since %s", s.Ready, s.View, failedAt)
	}
	h.kubeProxySyncs()
	h.advance(11 * time.Second)
	if s := h.a.State(); !s.Ready || !s.View.Current {
		t.Fatalf("read again: %+v", s.View)
	}
}

// TestLoopBlindWithoutKubeProxyState: no kube-proxy state found is no view
// of the datapath, not a clean node.
func TestLoopBlindWithoutKubeProxyState(t *testing.T) {
	h := newHarness(t)
	h.src.set(model.Observed{Datapath: model.ModeNone, Warnings: []string{"no kube-proxy table yet"}}, nil)
	h.advance(10 * time.Second)
	if s := h.a.State(); s.Ready || s.View.Code != ViewNoDatapath || !strings.Contains(s.View.Reason, "no kube-proxy table yet") {
		t.Fatalf("no kube-proxy state: ready %v view %+v", s.Ready, s.View)
	}
}

// fallbackSource is a reader reporting a fallback in force.
type fallbackSource struct {
	fakeSource
	since time.Time
}

func (f *fallbackSource) Fallback() (from, to, reason string, since time.Time) {
	return "netlink", "iptables-save", "rule 3 of KUBE-SEP-X does not decode", f.since
}

// TestFallbacksReachTheState: the reader's fallback, those known at start
// and the change events ending are all in State.Fallbacks.
func TestFallbacksReachTheState(t *testing.T) {
	h := newHarness(t)
	src := &fallbackSource{since: start}
	h.src = &src.fakeSource
	h.a = New(Options{Config: h.a.cfg, Clock: h.clk, Cluster: h.c, Datapath: src, Mode: model.ModeIPTables, Recorder: h,
		Fallbacks: []Fallback{{Reader: FallbackChangeEvents, From: "kernel timestamp", To: "read time", Reason: "no BPF", Since: start}}})
	h.start()
	h.a.onChange(h.ctx, datapath.ChangeEvent{}, false)
	fb := h.a.State().Fallbacks
	if len(fb) != 3 || fb[0].Reader != model.ModeIPTables || fb[0].To != "iptables-save" || fb[1].To != "read time" ||
		fb[2].From != "events" || fb[2].To != "polling" {
		t.Fatalf("fallbacks %+v; want the reader's, the start one, polling", fb)
	}
}

// TestViewChangesLoggedOnce: losing the view is logged once with its
// reason and error, however many steps and queries see it; regaining it once.
func TestViewChangesLoggedOnce(t *testing.T) {
	h := newHarness(t)
	var buf bytes.Buffer
	h.a = New(Options{Config: h.a.cfg, Clock: h.clk, Cluster: h.c, Datapath: h.src, Mode: model.ModeIPTables, Recorder: h,
		Log: slog.New(slog.NewTextHandler(&buf, nil))})
	h.start()
	if !strings.Contains(buf.String(), "view current") {
		t.Fatalf("the first current view is not logged:\n%s", buf.String())
	}
	buf.Reset()
	h.src.set(model.Observed{}, errors.New("iptables-save: exit status 4"))
	for i := 0; i < 3; i++ {
		h.advance(11 * time.Second)
		_ = h.a.State()
	}
	if n := strings.Count(buf.String(), "no current view"); n != 1 || !strings.Contains(buf.String(), "code=datapath_read_failed") ||
		!strings.Contains(buf.String(), `last_err="iptables-save: exit status 4"`) {
		t.Fatalf("%d lines about the lost view; want 1 with code and error:\n%s", n, buf.String())
	}
	h.kubeProxySyncs()
	h.advance(11 * time.Second)
	_ = h.a.State()
	if n := strings.Count(buf.String(), "view current"); n != 1 {
		t.Fatalf("%d lines about the view regained; want 1:\n%s", n, buf.String())
	}
}

// TestStepReadsAPIHealthOnce: a step asks for the API health once, whether
// it only judges the view or also reads the datapath and updates the
// findings.
func TestStepReadsAPIHealthOnce(t *testing.T) {
	calls := 0
	api := APIState{}
	h := newHarnessWith(t, func(c *Config) { c.API = func() APIState { calls++; return api } })
	h.start()
	for _, d := range []time.Duration{time.Millisecond, 11 * time.Second} {
		calls = 0
		reads := h.src.n
		h.advance(d)
		if calls != 1 {
			t.Fatalf("step after %s (datapath reads %d): %d API health reads; want 1", d, h.src.n-reads, calls)
		}
	}
	if h.src.n < 2 {
		t.Fatalf("datapath read %d times: the 11s step did not read", h.src.n)
	}
}
