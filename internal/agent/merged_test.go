package agent

import (
	"net/netip"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

func mfe(i byte) model.Frontend {
	return model.NewFrontend(netip.AddrFrom4([4]byte{10, 96, 0, i}), 80, model.TCP, model.ClusterIP)
}

func mverdict(svc string) model.Verdict {
	return model.Verdict{Service: model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns", Name: svc}, Protocol: model.TCP}, Action: model.Reject}
}

// msvc is service svc of namespace ns, as mverdict names it.
func msvc(svc string) model.ServiceName { return model.ServiceName{Namespace: "ns", Name: svc} }

// TestMergedDesired: per-service replacement keeps the merged map equal to
// the union of the services, and a snapshot never changes afterwards.
func TestMergedDesired(t *testing.T) {
	var m mergedDesired
	m.rebuild(map[model.ServiceName]map[model.Frontend]model.Verdict{
		msvc("a"): {mfe(1): mverdict("a"), mfe(2): mverdict("a")},
		msvc("b"): {mfe(3): mverdict("b")},
	})
	snap := m.snapshot("n").Frontends
	if len(snap) != 3 {
		t.Fatalf("rebuild: %d frontends, want 3", len(snap))
	}
	if again := m.snapshot("n").Frontends; len(again) != 3 {
		t.Fatal("snapshot without a change must be the same content")
	}
	m.replace(msvc("a"), map[model.Frontend]model.Verdict{mfe(1): mverdict("a"), mfe(2): mverdict("a")},
		map[model.Frontend]model.Verdict{mfe(2): mverdict("a"), mfe(4): mverdict("a")})
	live := m.current("n").Frontends
	if _, ok := live[mfe(1)]; ok || len(live) != 3 {
		t.Fatalf("after replace: %v (frontend 1 must be gone, 2, 3, 4 kept)", live)
	}
	if _, ok := snap[mfe(1)]; !ok || len(snap) != 3 {
		t.Fatalf("the earlier snapshot changed: %v", snap)
	}
	if s2 := m.snapshot("n").Frontends; len(s2) != 3 {
		t.Fatalf("new snapshot: %v", s2)
	} else if _, ok := s2[mfe(4)]; !ok {
		t.Fatalf("new snapshot misses frontend 4: %v", s2)
	}
	// b claims a's frontend 4; a dropping it must not remove b's claim.
	m.replace(msvc("b"), nil, map[model.Frontend]model.Verdict{mfe(3): mverdict("b"), mfe(4): mverdict("b")})
	m.replace(msvc("a"), map[model.Frontend]model.Verdict{mfe(2): mverdict("a"), mfe(4): mverdict("a")}, nil)
	live = m.current("n").Frontends
	if v, ok := live[mfe(4)]; !ok || v.Service.Name != "b" || len(live) != 2 {
		t.Fatalf("after a's removal: %v (want b's 3 and 4)", live)
	}
}
