package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/deletions"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/watch"
)

// A removal without a trigger time is dated by the deletion request of the
// local pod whose endpoint it removed; a removal of a pod the agent never
// saw being deleted stays without T0.
func TestRemovalDatedByPodDeletion(t *testing.T) {
	cases := []struct {
		name    string
		podIP   string
		wantT0  bool
		trigger bool
	}{
		{"local pod deleted", "10.1.0.2", true, false},
		{"other pod deleted", "10.1.0.7", false, false},
		{"trigger time wins", "10.1.0.2", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.start()
			requested := h.clk.Now().Add(-1500 * time.Millisecond) // deletionTimestamp - grace
			h.a.OnEvent(watch.Event{Kind: watch.KindPod, Name: "shop/web-2", At: h.clk.Now(),
				PodIPs: []netip.Addr{netip.MustParseAddr(tc.podIP)}, DeletionRequested: requested})
			h.advance(200 * time.Millisecond)
			var trigger time.Time
			if tc.trigger {
				trigger = h.clk.Now().Add(-100 * time.Millisecond)
			}
			h.setSlice(slice("web", "10.1.0.1"), trigger) // 10.1.0.2 removed
			h.advance(100 * time.Millisecond)
			h.kubeProxySyncs()
			h.advance(300 * time.Millisecond)
			if len(h.lags) != 1 || h.lags[0].Kind != drift.ChangeRemove {
				t.Fatalf("samples %+v, want one removal", h.lags)
			}
			s := h.lags[0]
			if got := s.Removed; len(got) != 1 || got[0] != netip.MustParseAddr("10.1.0.2") {
				t.Errorf("Removed = %v, want [10.1.0.2]", got)
			}
			e2e, ok := s.NetworkLatency()
			switch {
			case !tc.wantT0:
				if ok || s.T0Source != "" {
					t.Errorf("T0 %v (%s) for a removal of a pod not seen deleted", s.T0, s.T0Source)
				}
			case tc.trigger:
				if s.T0Source != drift.T0Trigger || e2e != 500*time.Millisecond {
					t.Errorf("T0 source %q E2E %v, want the trigger time (500ms)", s.T0Source, e2e)
				}
			default:
				// requested 1.5 s before the pod event; T2 0.6 s after it.
				if s.T0Source != drift.T0PodDeletion || e2e != 2100*time.Millisecond {
					t.Errorf("T0 source %q E2E %v, want pod-deletion 2.1s", s.T0Source, e2e)
				}
			}
		})
	}
}

func TestDeletionMemoryExpiresAndTracksIPReuse(t *testing.T) {
	h := newHarness(t)
	h.start()
	ip := netip.MustParseAddr("10.1.0.2")
	first := h.clk.Now()
	h.a.OnEvent(watch.Event{Kind: watch.KindPod, Name: "shop/old", At: first, PodIPs: []netip.Addr{ip}, DeletionRequested: first})
	// The same pod deleted again (grace 0) does not move its first request.
	h.a.OnEvent(watch.Event{Kind: watch.KindPod, Name: "shop/old", At: first.Add(time.Second), PodIPs: []netip.Addr{ip},
		DeletionRequested: first.Add(time.Second)})
	if _, got, _ := h.a.tracker.deletions.Requested(ip); !got.Equal(first) {
		t.Errorf("after a second delete: %v, want the first request %v", got, first)
	}
	// The IP is reused by a new pod that is deleted in turn.
	later := first.Add(time.Minute)
	h.a.OnEvent(watch.Event{Kind: watch.KindPod, Name: "shop/new", At: later, PodIPs: []netip.Addr{ip}, DeletionRequested: later})
	if pod, at, _ := h.a.tracker.deletions.Requested(ip); pod != "shop/new" || !at.Equal(later) {
		t.Errorf("after reuse: %s at %v, want shop/new at %v", pod, at, later)
	}
	h.a.tracker.deletions.Expire(later.Add(deletions.DefaultKeep + time.Second))
	if n := h.a.tracker.deletions.Len(); n != 0 {
		t.Errorf("%d deletions kept after %s", n, deletions.DefaultKeep)
	}
}
