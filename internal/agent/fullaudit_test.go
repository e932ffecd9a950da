package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/model"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestFullAuditCorrectsWhatTheIncrementalPathMissed: a slice change the
// agent never heard of (a lost delivery, or a bug in the incremental path)
// is found by the full audit: the desired state is derived again, the reader
// is told to read everything, and the mismatch is reported.
func TestFullAuditCorrectsWhatTheIncrementalPathMissed(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.c.mu.Lock()
	h.c.slices["shop/web"] = []*discoveryv1.EndpointSlice{slice("web", "10.1.0.1", "10.1.0.9")} // no event
	h.c.mu.Unlock()
	h.advance(h.a.cfg.AuditInterval)
	if s := h.a.State(); len(s.Pending)+len(s.Stale) != 0 || h.src.resyncs != 0 {
		t.Fatalf("before the full audit: pending %v stale %v resyncs %d (nothing was delivered)", s.Pending, s.Stale, h.src.resyncs)
	}
	for d := h.a.cfg.AuditInterval; d < h.a.cfg.FullAuditInterval; d += h.a.cfg.AuditInterval {
		h.advance(h.a.cfg.AuditInterval)
	}
	h.advance(h.a.cfg.AuditInterval)
	if h.src.resyncs != 1 {
		t.Fatalf("%d reader resyncs after %v, want 1", h.src.resyncs, h.a.cfg.FullAuditInterval)
	}
	h.advance(ConfirmDelay)
	s := h.a.State()
	if len(s.Pending)+len(s.Stale) == 0 {
		t.Fatal("the full audit did not report the undelivered change (kube-proxy has the old backends)")
	}
	if s.FullAudits != 1 || s.FullAuditCorrections != 1 {
		t.Fatalf("full audits %d, corrections %d: want 1 and 1 (shop/web)", s.FullAudits, s.FullAuditCorrections)
	}
	h.advance(time.Second)
	if h.src.resyncs != 1 {
		t.Fatalf("%d resyncs: the next read must be incremental again", h.src.resyncs)
	}
}

// TestFullAuditAsksForAnAudit: a reader that can audit the state it keeps
// (iptables-nft over netlink) is asked for an audit read by the full audit,
// not resynced: its state stays in use if commits interrupt the read.
func TestFullAuditAsksForAnAudit(t *testing.T) {
	h := newHarness(t)
	h.src.auditable = true
	h.start()
	for d := time.Duration(0); d <= h.a.cfg.FullAuditInterval; d += h.a.cfg.AuditInterval {
		h.advance(h.a.cfg.AuditInterval)
	}
	h.src.mu.Lock()
	reqs, resyncs := h.src.auditReqs, h.src.resyncs
	h.src.mu.Unlock()
	if reqs != 1 || resyncs != 0 || h.a.State().FullAudits != 1 {
		t.Fatalf("after %v: %d audit requests, %d resyncs, %d full audits; want 1, 0, 1", h.a.cfg.FullAuditInterval, reqs, resyncs, h.a.State().FullAudits)
	}
	h.a.onChange(h.ctx, datapath.ChangeEvent{Lost: true, Received: h.clk.Now()}, true)
	h.src.mu.Lock()
	defer h.src.mu.Unlock()
	if h.src.resyncs != 1 || h.src.auditReqs != 1 {
		t.Fatalf("lost events: %d resyncs, %d audit requests; want the state dropped (1 resync)", h.src.resyncs, h.src.auditReqs)
	}
}

// TestLostChangeEventsResyncTheReader: a lost-events notice makes the next
// read a full one (no event will bring the reader's cache up to date), and
// dates that read; an ordinary event does not drop the cache.
func TestLostChangeEventsResyncTheReader(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.a.onChange(h.ctx, datapath.ChangeEvent{Generation: 7, Received: h.clk.Now()}, true)
	if h.src.resyncs != 0 {
		t.Fatalf("an ordinary change event resynced the reader (%d)", h.src.resyncs)
	}
	h.a.onChange(h.ctx, datapath.ChangeEvent{Lost: true, Received: h.clk.Now()}, true)
	if h.src.resyncs != 1 {
		t.Fatalf("%d resyncs after lost events, want 1", h.src.resyncs)
	}
	h.a.mu.Lock()
	first := h.a.sched.firstEvent
	h.a.mu.Unlock()
	if first.IsZero() {
		t.Fatal("lost events did not date the next read")
	}
}

// TestReaderWarningsInStatus: the reader's warnings are published with the
// observation and counted in the status notes (a degraded source is said).
func TestReaderWarningsInStatus(t *testing.T) {
	h := newHarness(t)
	h.start()
	obs := h.desiredOf()
	obs.Warnings = []string{"iptables-nft tables not read over netlink, read with iptables-save instead: x"}
	h.src.set(obs, nil)
	h.advance(h.a.cfg.AuditInterval)
	s := h.a.State()
	if len(s.Observed.Warnings) != 1 {
		t.Fatalf("published warnings %v", s.Observed.Warnings)
	}
	found := false
	for _, n := range s.Notes {
		found = found || strings.Contains(n, "datapath reader: 1 warning(s)")
	}
	if !found {
		t.Fatalf("notes %v do not count the reader's warning", s.Notes)
	}
}

// TestReaderSelfAuditsPublished: a reader that audits the state it patches
// from change messages has its counts published with the next read.
func TestReaderSelfAuditsPublished(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.src.mu.Lock()
	h.src.audits = [3]uint64{3, 1, 2}
	h.src.mu.Unlock()
	if s := h.a.State(); s.ReaderAudits != 0 {
		t.Fatalf("published %d reader audits before the next read", s.ReaderAudits)
	}
	h.advance(h.a.cfg.AuditInterval)
	if s := h.a.State(); s.ReaderAudits != 3 || s.ReaderAuditDiffs != 1 || s.ReaderAuditsDeferred != 2 {
		t.Fatalf("reader audits %d, differences %d, deferred %d: want 3, 1 and 2", s.ReaderAudits, s.ReaderAuditDiffs, s.ReaderAuditsDeferred)
	}
}

// TestPublishedObservationIsAFrozenCopy: with a reader that changes its
// frontends in place, State hands out a copy that the next change does not
// touch.
func TestPublishedObservationIsAFrozenCopy(t *testing.T) {
	h := newHarness(t)
	h.start()
	obs := h.desiredOf()
	obs.Version = 42
	h.src.set(obs, nil)
	h.advance(h.a.cfg.AuditInterval)
	s := h.a.State()
	if s.Observed.Version != 42 || len(s.Observed.Frontends) == 0 {
		t.Fatalf("published version %d with %d frontends, want 42 and the fake's", s.Observed.Version, len(s.Observed.Frontends))
	}
	n := len(s.Observed.Frontends)
	h.src.inPlace(func(m map[model.Frontend]model.Verdict) {
		for fe := range m {
			delete(m, fe)
		}
	})
	if len(s.Observed.Frontends) != n || len(h.a.State().Observed.Frontends) != n {
		t.Fatal("a change in place reached the published observation")
	}
}

// TestChangeAppliedInPlaceIsCompared: a change event applied to a reader
// that shares its observation with its cache may change the last
// observation in place; the next read, naming nothing, is compared in full
// and the change is found (a diff against the changed map would find none).
func TestChangeAppliedInPlaceIsCompared(t *testing.T) {
	h := newHarness(t)
	h.start()
	obs := h.desiredOf()
	obs.Version = 7
	h.src.set(obs, nil)
	h.advance(h.a.cfg.AuditInterval)
	h.src.inPlace(func(m map[model.Frontend]model.Verdict) {
		for fe := range m {
			delete(m, fe)
		}
	})
	h.src.mu.Lock()
	h.src.obs.Version = 8
	h.src.mu.Unlock()
	h.a.onChange(h.ctx, datapath.ChangeEvent{Generation: 8, Received: h.clk.Now()}, true)
	h.advance(time.Millisecond)
	if s := h.a.State(); len(s.Pending)+len(s.Stale) == 0 {
		t.Fatal("frontends removed in place by an applied change event: no mismatch found")
	}
}

// TestFullAuditDropsThePendingChangeItCorrects: a change is pending when
// a later change of the same service is missed; the full audit corrects
// the desired state, and kube-proxy already programs it. The pending change
// waits for a state nobody asked for: it is dropped and counted, not left
// pending (its age growing for ever, as if kube-proxy lagged).
func TestFullAuditDropsThePendingChangeItCorrects(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.setSlice(slice("web", "10.1.0.1", "10.1.0.2", "10.1.0.3"), time.Time{}) // delivered: pending
	h.advance(100 * time.Millisecond)
	h.c.mu.Lock()
	h.c.slices["shop/web"] = []*discoveryv1.EndpointSlice{slice("web", "10.1.0.1", "10.1.0.4")} // no event
	h.c.mu.Unlock()
	h.kubeProxySyncs()
	for d := time.Duration(0); d <= h.a.cfg.FullAuditInterval; d += h.a.cfg.AuditInterval {
		if s := h.a.State(); s.FullAudits == 0 && len(s.PendingChanges) != 1 {
			t.Fatalf("before the full audit: pending %d changes, want the delivered one", len(s.PendingChanges))
		}
		h.advance(h.a.cfg.AuditInterval)
	}
	h.advance(ConfirmDelay)
	s := h.a.State()
	if s.FullAuditCorrections != 1 {
		t.Fatalf("full audit corrections %d, want 1", s.FullAuditCorrections)
	}
	if len(s.PendingChanges) != 0 || s.LagSamplesDropped != 1 || len(h.lags) != 0 {
		t.Fatalf("after the correction: pending %d, dropped %d, samples %d; want 0, 1, 0", len(s.PendingChanges), s.LagSamplesDropped, len(h.lags))
	}
	if len(s.Stale)+len(s.Pending) != 0 {
		t.Fatalf("findings %v %v: kube-proxy programs the corrected state", s.Stale, s.Pending)
	}
}

// TestFullAuditWaitsForTheChangeItOvertakes: a slice is in the watch
// cache but its event has not reached the loop when the full audit runs
// (the informer updates its store before it calls the handlers). The audit
// does not correct at once: the delivery, within ConfirmDelay, is applied
// and measured as a change. A delivery later than that finds the state
// already corrected and records nothing: the change is counted dropped.
func TestFullAuditWaitsForTheChangeItOvertakes(t *testing.T) {
	for _, late := range []bool{false, true} {
		h := newHarness(t)
		h.start()
		next := slice("web", "10.1.0.1", "10.1.0.4")
		h.c.mu.Lock()
		h.c.slices["shop/web"] = []*discoveryv1.EndpointSlice{next} // event still on its way
		h.c.mu.Unlock()
		for h.a.State().FullAudits == 0 {
			h.advance(h.a.cfg.AuditInterval)
		}
		if s := h.a.State(); s.FullAuditCorrections != 0 || h.a.nextWait() > ConfirmDelay {
			t.Fatalf("at the full audit: %d corrections, next step in %s; want none yet, and a step within %s",
				s.FullAuditCorrections, h.a.nextWait(), ConfirmDelay)
		}
		if late {
			h.advance(ConfirmDelay)
		} else {
			h.advance(ConfirmDelay / 2)
		}
		h.setSlice(next, time.Time{}) // the overtaken event arrives
		h.kubeProxySyncs()
		h.advance(ConfirmDelay)
		h.advance(h.a.cfg.AuditInterval)
		s := h.a.State()
		wantCorr, wantSamples := uint64(0), 1
		if late {
			wantCorr, wantSamples = 1, 0
		}
		if s.FullAuditCorrections != wantCorr || s.LagSamplesDropped != wantCorr || len(h.lags) != wantSamples || len(s.PendingChanges) != 0 {
			t.Fatalf("delivery late %v: corrections %d, dropped %d, samples %d, pending %d; want %d, %d, %d, 0",
				late, s.FullAuditCorrections, s.LagSamplesDropped, len(h.lags), len(s.PendingChanges), wantCorr, wantCorr, wantSamples)
		}
	}
}
