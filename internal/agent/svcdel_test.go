package agent

import (
	"context"
	"maps"
	"net/netip"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

// inPlaceSource is a reader that keeps the incremental protocol of the
// event-fed readers with their own bookkeeping (nfevents.Observation):
// Snapshot returns the observation whose frontends the next change event
// changes in place, naming what changed (Since, Changed).
type inPlaceSource struct {
	fakeSource
	pub nfevents.Observation
}

func (s *inPlaceSource) Snapshot(context.Context) (model.Observed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return s.pub.Returned(s.pub.Current()), nil
}

func (s *inPlaceSource) Frozen() (model.Observed, bool) { return s.pub.Frozen() }

// publish starts from a new evaluation (a full read).
func (s *inPlaceSource) publish(m map[model.Frontend]model.Verdict) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pub.Publish(model.Observed{Datapath: model.ModeIPTables, Frontends: maps.Clone(m)}, nil)
}

// applyInPlace makes the current frontends match m in place, as a change
// event applied to the reader's cache does, naming what changed.
func (s *inPlaceSource) applyInPlace(m map[model.Frontend]model.Verdict) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.pub.Current()
	changed := map[model.Frontend]bool{}
	model.MarkDiffering(changed, cur.Frontends, m)
	s.pub.Lock()
	defer s.pub.Unlock()
	for fe := range changed {
		if v, ok := m[fe]; ok {
			cur.Frontends[fe] = v
		} else {
			delete(cur.Frontends, fe)
		}
	}
	s.pub.PublishLocked(cur, changed)
}

// TestServiceDeletedWithSliceInPlace: a Service and its slice deleted
// together; kube-proxy's sync removing its rules reaches the reader as a
// change event applied in place, before or after the agent saw the
// deletion. No stale_frontend stays once the observation drops the
// frontend.
func TestServiceDeletedWithSliceInPlace(t *testing.T) {
	for _, watchFirst := range []bool{true, false} {
		h := newHarness(t)
		src := &inPlaceSource{}
		h.a.src = src
		h.c.services["shop/web"] = service("web", "10.96.0.10")
		h.c.slices["shop/web"] = []*discoveryv1.EndpointSlice{slice("web", "10.1.0.1")}
		h.c.services["shop/gone"] = service("gone", "10.96.0.11")
		h.c.slices["shop/gone"] = []*discoveryv1.EndpointSlice{slice("gone", "10.1.0.2", "10.1.0.3")}
		src.publish(h.desiredOf().Frontends)
		h.a.Step(h.ctx)
		if s := h.a.State(); !s.Ready || len(s.Stale)+len(s.Pending) != 0 || len(s.Observed.Frontends) != 2 {
			t.Fatalf("initial state not clean: %+v", s)
		}
		gone := model.ServiceName{Namespace: "shop", Name: "gone"}
		deleteInWatch := func() {
			h.c.mu.Lock()
			delete(h.c.services, "shop/gone")
			delete(h.c.slices, "shop/gone")
			h.c.mu.Unlock()
			h.a.OnEvent(watch.Event{Kind: watch.KindService, Service: gone, At: h.clk.Now()})
			h.a.OnEvent(watch.Event{Kind: watch.KindEndpointSlice, Service: gone, At: h.clk.Now()})
		}
		kubeProxySyncs := func() {
			src.applyInPlace(h.desiredOf().Frontends)
			h.a.onChange(h.ctx, datapath.ChangeEvent{Received: h.clk.Now()}, true)
		}
		if watchFirst {
			deleteInWatch()
			h.advance(time.Second)
			if s := h.a.State(); len(s.Pending) == 0 || s.Pending[0].Kind != model.StaleFrontend {
				t.Fatalf("watch first: want a pending stale_frontend while kube-proxy has not synced, got %+v", s.Pending)
			}
			kubeProxySyncs()
		} else {
			ghost := h.desiredOf()
			delete(ghost.Frontends, model.NewFrontend(netip.MustParseAddr("10.96.0.11"), 80, model.TCP, model.ClusterIP))
			src.applyInPlace(ghost.Frontends)
			h.a.onChange(h.ctx, datapath.ChangeEvent{Received: h.clk.Now()}, true)
			h.advance(100 * time.Millisecond)
			deleteInWatch()
		}
		for range 3 {
			h.advance(h.a.cfg.StaleAfter)
		}
		s := h.a.State()
		if len(s.Stale)+len(s.Pending) != 0 {
			t.Fatalf("watch first %v: findings stay after kube-proxy removed the service: stale %+v pending %+v", watchFirst, s.Stale, s.Pending)
		}
		if len(s.Observed.Frontends) != 1 {
			t.Fatalf("watch first %v: observed %v, want web's frontend only", watchFirst, s.Observed.Frontends)
		}
	}
}
