package drift

import (
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// TestSampledMismatchNeedsASecondSighting: a node source's finding, held
// between its runs, is promoted only when a run stale-after later still
// finds it; one sighting, however long it is held, stays pending, and a
// mismatch the next run no longer finds is forgotten. The datapath's
// mismatches, compared at every audit, are promoted by their age alone.
func TestSampledMismatchNeedsASecondSighting(t *testing.T) {
	link := model.Finding{Kind: model.OrphanLink, Subject: "v7 (10.244.1.2)"}
	route := model.Finding{Kind: model.StaleRoute, Subject: "10.244.9.0/24"}
	dp := model.Finding{Kind: model.StaleBackend, Service: sp, Frontend: &fe}
	p := Proof{WatchHealthy: true, LastDelivery: at(-1)}
	ft := NewFindingTracker(3 * time.Second)
	proven := Proof{WatchHealthy: true, LastDelivery: at(500)}
	ft.UpdateSampled([]model.Finding{dp}, []model.Finding{link, route}, at(0), at(0), p)
	// Audits fold the same run in again, past stale-after.
	for _, ms := range []int{1000, 3000, 9000} {
		ft.UpdateSampled([]model.Finding{dp}, []model.Finding{link, route}, at(ms), at(0), proven)
	}
	stale := map[model.FindingKind]bool{}
	for _, s := range ft.Stale() {
		stale[s.Kind] = true
	}
	if !stale[model.StaleBackend] || stale[model.OrphanLink] || stale[model.StaleRoute] {
		t.Fatalf("after one node run held 9 s: stale %v; want the datapath mismatch only", stale)
	}
	// The next run, 10 s after the first: the route is still there, the
	// interface is gone.
	ft.UpdateSampled([]model.Finding{dp}, []model.Finding{route}, at(10100), at(10000), proven)
	stale = map[model.FindingKind]bool{}
	for _, s := range ft.Stale() {
		stale[s.Kind] = true
		if s.Kind == model.StaleRoute && !s.FirstSeen.Equal(at(0)) {
			t.Errorf("stale_route first seen %v, want the first run's start", s.FirstSeen)
		}
	}
	if !stale[model.StaleRoute] || stale[model.OrphanLink] || len(ft.Pending()) != 0 {
		t.Fatalf("after a second run: stale %v pending %v; want the route stale, the interface forgotten", stale, ft.Pending())
	}
}
