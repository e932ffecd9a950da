package agent

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/wait"
	"github.com/netdrift/netdrift/internal/watch"
)

// slowSource is a node-level source that answers only when released.
type slowSource struct {
	release chan error
	calls   chan struct{}
}

func (s *slowSource) Name() string { return "node" }

func (s *slowSource) Findings(ctx context.Context, _ *watch.ClusterState, _ func() model.Desired) ([]model.Finding, error) {
	s.calls <- struct{}{}
	if err := <-s.release; err != nil {
		return nil, err
	}
	return []model.Finding{{Kind: model.StaleRoute, Subject: "10.244.9.0/24", Detail: "route to a gone node"}}, nil
}

// A slow node-level run does not hold up datapath reads (which time
// kube-proxy's changes); its findings and status land when it finishes.
func TestNodeRunsBesideDatapathReads(t *testing.T) {
	src := &slowSource{release: make(chan error), calls: make(chan struct{}, 4)}
	h := newHarnessWith(t, nil, src)
	h.start() // first audit: the node-level run starts and blocks
	<-src.calls
	reads := h.src.n
	for i := 0; i < 3; i++ {
		h.advance(10 * time.Second) // would be due again: must not start a second run
	}
	if h.src.n-reads < 3 {
		t.Fatalf("%d datapath reads while the node-level run was busy, want 3", h.src.n-reads)
	}
	if len(src.calls) != 0 {
		t.Fatal("a second node-level run started while one was running")
	}
	src.release <- nil
	wait.For(t, 5*time.Second, "the condition", func() bool { h.a.mu.Lock(); defer h.a.mu.Unlock(); return h.a.nodeRuns.done })
	h.advance(time.Millisecond) // the finished run makes the next step read and fold it in
	st := h.a.State()
	if len(st.Pending)+len(st.Stale) != 1 || !sourceUp(st, "node") {
		t.Fatalf("after the run: pending %v stale %v sources %+v", st.Pending, st.Stale, st.Sources)
	}
	h.a.mu.Lock()
	next := h.a.nodeRuns.interval(h.a.cfg) // the blocked run took 30 s: the cadence stretched
	h.a.mu.Unlock()
	if next <= h.a.cfg.AuditInterval {
		t.Fatalf("a 30 s run left the node-level cadence at %v", next)
	}
	h.advance(next) // due again: a second run, which fails
	<-src.calls
	src.release <- errors.New("netlink: operation not permitted")
	wait.For(t, 5*time.Second, "the condition", func() bool { h.a.mu.Lock(); defer h.a.mu.Unlock(); return h.a.nodeRuns.done })
	h.advance(time.Millisecond)
	if st := h.a.State(); sourceUp(st, "node") {
		t.Fatalf("failed node-level run reported up: %+v", st.Sources)
	}
}

func sourceUp(st State, name string) bool {
	for _, s := range st.Sources {
		if s.Name == name {
			return s.Up && !s.LastSuccess.IsZero()
		}
	}
	return false
}

// A Node deletion runs the node-level sources at once instead of on the
// slow cadence (endpoint_on_missing_node, stale_route).
func TestNodeDeletionRunsNodeSourcesNow(t *testing.T) {
	src := &slowSource{release: make(chan error, 4), calls: make(chan struct{}, 4)}
	h := newHarnessWith(t, nil, src)
	src.release <- nil
	h.start()
	<-src.calls
	wait.For(t, 5*time.Second, "the condition", func() bool { h.a.mu.Lock(); defer h.a.mu.Unlock(); return h.a.nodeRuns.done })
	h.advance(time.Second) // folds the first run in; the next is 10 s away
	h.a.OnEvent(watch.Event{Kind: watch.KindNode, Name: "node-3", Deleted: true, At: h.clk.Now()})
	src.release <- nil
	h.advance(100 * time.Millisecond)
	select {
	case <-src.calls:
	case <-time.After(5 * time.Second):
		t.Fatal("a Node deletion did not start a node-level run")
	}
}

// TestNodeRunsIntervalFollowsCost: a cheap run keeps the audit cadence; an
// expensive one (a large cluster) spaces the runs so they stay within budget.
func TestNodeRunsIntervalFollowsCost(t *testing.T) {
	cfg := DefaultConfig()
	r := nodeRuns{cost: 20 * time.Millisecond}
	if got := r.interval(cfg); got != cfg.AuditInterval {
		t.Errorf("20 ms run: interval %v, want the audit interval %v", got, cfg.AuditInterval)
	}
	r.cost = 400 * time.Millisecond
	if got := r.interval(cfg); got != 40*time.Second {
		t.Errorf("400 ms run: interval %v, want 40s (100 x its cost)", got)
	}
	r.cost = time.Minute
	if got := r.interval(cfg); got != 30*cfg.AuditInterval {
		t.Errorf("1 min run: interval %v, want the cap %v", got, 30*cfg.AuditInterval)
	}
}

// desiredSource is a node-level source that takes the desired state only
// when told to, twice, and reports what it got.
type desiredSource struct {
	take bool
	got  chan [2]model.Desired
}

func (s *desiredSource) Name() string { return "node" }

func (s *desiredSource) Findings(_ context.Context, _ *watch.ClusterState, desired func() model.Desired) ([]model.Finding, error) {
	var d [2]model.Desired
	if s.take {
		d = [2]model.Desired{desired(), desired()}
	}
	s.got <- d
	return nil, nil
}

// A node-level run copies the desired state only if a source asks for it,
// and then once: at 100k endpoints under churn the copy at every run's
// start was over a quarter of what the agent allocated.
func TestNodeRunTakesTheDesiredStateOnlyWhenAsked(t *testing.T) {
	for _, take := range []bool{false, true} {
		src := &desiredSource{take: take, got: make(chan [2]model.Desired, 1)}
		h := newHarnessWith(t, nil, src)
		h.c.services["shop/web"] = service("web", "10.96.0.10")
		h.c.slices["shop/web"] = []*discoveryv1.EndpointSlice{slice("web", "10.1.0.1", "10.1.0.2")}
		h.kubeProxySyncs()
		h.a.Step(h.ctx) // the first audit starts the node-level run (no State(): it copies the desired state)
		d := <-src.got
		h.a.mu.Lock()
		frozen, want := h.a.tracker.merged.frozen, len(h.a.tracker.merged.current(node).Frontends)
		h.a.mu.Unlock()
		if !take {
			if frozen != nil {
				t.Error("the run copied the desired state though no source asked for it")
			}
			continue
		}
		if want == 0 || len(d[0].Frontends) != want || d[0].Node != node {
			t.Fatalf("desired state handed over: %d frontends for %q, the agent has %d", len(d[0].Frontends), d[0].Node, want)
		}
		if reflect.ValueOf(d[0].Frontends).Pointer() != reflect.ValueOf(d[1].Frontends).Pointer() {
			t.Error("two calls in one run copied the desired state twice")
		}
	}
}
