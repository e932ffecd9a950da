package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/wait"
	"github.com/netdrift/netdrift/internal/watch"
)

// scriptedSource is a node source answering each run with the next entry
// of runs (the last one from then on).
type scriptedSource struct {
	mu   sync.Mutex
	runs [][]model.Finding
	n    int
}

func (s *scriptedSource) Name() string { return "node" }

func (s *scriptedSource) Findings(context.Context, *watch.ClusterState, func() model.Desired) ([]model.Finding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.n, len(s.runs)-1)
	s.n++
	return s.runs[i], nil
}

func (s *scriptedSource) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// TestNodeFindingOfOneRunNotPromoted: an interface caught by one node run
// between its pod's deletion and its removal is held until the next run,
// past --stale-after, but is no stale finding: only a run stale-after later
// that still finds it promotes it.
func TestNodeFindingOfOneRunNotPromoted(t *testing.T) {
	link := model.Finding{Kind: model.OrphanLink, Subject: "v7 (10.244.1.2)", Detail: "no pod of this node"}
	src := &scriptedSource{runs: [][]model.Finding{nil, {link}, nil, {link}, {link}}}
	h := newHarnessWith(t, nil, src)
	h.start() // run 1: nothing
	finished := func(n int) {
		t.Helper()
		wait.For(t, 5*time.Second, "node run", func() bool {
			h.a.mu.Lock()
			defer h.a.mu.Unlock()
			return src.calls() >= n && !h.a.nodeRuns.running
		})
	}
	run := func(n int) {
		t.Helper()
		finished(n - 1)
		h.advance(h.a.cfg.AuditInterval) // due: run n starts
		finished(n)
		h.advance(time.Millisecond) // folded in
	}
	lease := func() { // a delivery: the view is current
		h.advance(100 * time.Millisecond)
		h.a.OnEvent(watch.Event{Kind: watch.KindLease, At: h.clk.Now()})
	}
	run(2) // finds the interface
	lease()
	for i := 0; i < 3; i++ { // 1.5 stale-after, before the next run is due
		h.advance(h.a.cfg.StaleAfter / 2)
		if s := h.a.State(); len(s.Stale) != 0 {
			t.Fatalf("%v after the only sighting: stale %v", time.Duration(i+1)*h.a.cfg.StaleAfter/2, s.Stale)
		}
	}
	run(3) // gone
	if s := h.a.State(); len(s.Stale)+len(s.Pending) != 0 {
		t.Fatalf("after a run without it: stale %v pending %v", s.Stale, s.Pending)
	}
	run(4) // back, and still there at run 5
	lease()
	run(5)
	if s := h.a.State(); len(s.Stale) != 1 || s.Stale[0].Kind != model.OrphanLink {
		t.Fatalf("found by two runs %v apart: stale %v pending %v", h.a.cfg.AuditInterval, s.Stale, s.Pending)
	}
}
