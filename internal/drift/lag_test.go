package drift

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func obsOf(m map[model.Frontend]model.Verdict) model.Observed {
	return model.Observed{Datapath: model.ModeIPTables, Frontends: m}
}

func TestClassifyChange(t *testing.T) {
	one := map[model.Frontend]model.Verdict{fe: fwd(be1)}
	two := map[model.Frontend]model.Verdict{fe: fwd(be1, be2)}
	swap := map[model.Frontend]model.Verdict{fe: fwd(be2)}
	rej := map[model.Frontend]model.Verdict{fe: {Action: model.Reject}}
	cases := []struct {
		name       string
		prev, next map[model.Frontend]model.Verdict
		want       ChangeKind
		changed    bool
	}{
		{"add_backend", one, two, ChangeAdd, true},
		{"remove_backend", two, one, ChangeRemove, true},
		{"replace_backend_is_update", one, swap, ChangeUpdate, true},
		{"new_service_is_add", nil, one, ChangeAdd, true},
		{"deleted_service_is_remove", one, nil, ChangeRemove, true},
		{"verdict_change_is_update", one, rej, ChangeUpdate, true},
		{"no_change", one, map[model.Frontend]model.Verdict{fe: fwd(be1)}, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, ok := ClassifyChange(c.prev, c.next)
			if k != c.want || ok != c.changed {
				t.Fatalf("got %q,%v want %q,%v", k, ok, c.want, c.changed)
			}
		})
	}
}

func TestLagTracker(t *testing.T) {
	one := map[model.Frontend]model.Verdict{fe: fwd(be1)}
	two := map[model.Frontend]model.Verdict{fe: fwd(be1, be2)}
	three := map[model.Frontend]model.Verdict{fe: fwd(be1, be2, be3)}

	t.Run("add_exact_T2", func(t *testing.T) {
		lt := NewLagTracker()
		lt.Record(Change{Service: model.ServiceName{Namespace: "shop", Name: "cart"}, Kind: ChangeAdd, T0: at(-40), T1: at(0), Previous: one, Desired: two})
		if s := lt.Observe(obsOf(one), at(100)); len(s) != 0 {
			t.Fatalf("converged early: %+v", s)
		}
		s := lt.Observe(obsOf(two), at(250))
		if len(s) != 1 || s[0].NodeLag() != 250*time.Millisecond {
			t.Fatalf("samples %+v", s)
		}
		if l, ok := s[0].NetworkLatency(); !ok || l != 290*time.Millisecond {
			t.Fatalf("network latency %v %v", l, ok)
		}
		if len(lt.Pending()) != 0 {
			t.Fatal("still pending")
		}
	})
	t.Run("held_since_dates_T2", func(t *testing.T) {
		// An observation change events say held since 100 ms: a change
		// delivered before that converged at 100 ms, one delivered after it
		// was programmed before the agent knew (T2 = T1); one delivered after
		// the read is not judged by it.
		lt := NewLagTracker()
		lt.Record(Change{Service: model.ServiceName{Namespace: "shop", Name: "a"}, Kind: ChangeAdd, T1: at(0), Previous: one, Desired: two})
		lt.Record(Change{Service: model.ServiceName{Namespace: "shop", Name: "b"}, Kind: ChangeAdd, T1: at(150), Previous: one, Desired: two})
		lt.Record(Change{Service: model.ServiceName{Namespace: "shop", Name: "c"}, Kind: ChangeAdd, T1: at(600), Previous: one, Desired: two})
		s := lt.ObserveSince(obsOf(two), at(500), at(100))
		if len(s) != 2 || s[0].T2 != at(100) || s[1].T2 != at(150) {
			t.Fatalf("samples %+v, want shop/a at 100 ms and shop/b at 150 ms", s)
		}
		if p := lt.Pending(); len(p) != 1 || p[0].Service.String() != "shop/c" {
			t.Fatalf("pending %+v, want shop/c", p)
		}
	})
	t.Run("remove_exact_T2", func(t *testing.T) {
		lt := NewLagTracker()
		lt.Record(Change{Service: model.ServiceName{Name: "s"}, Kind: ChangeRemove, T1: at(0), Previous: two, Desired: one})
		if s := lt.Observe(obsOf(two), at(3000)); len(s) != 0 {
			t.Fatal("converged while stale rule remains")
		}
		s := lt.Observe(obsOf(one), at(5000))
		if len(s) != 1 || s[0].NodeLag() != 5*time.Second || s[0].Kind != ChangeRemove {
			t.Fatalf("samples %+v", s)
		}
		if _, ok := s[0].NetworkLatency(); ok {
			t.Fatal("latency without T0")
		}
	})
	t.Run("service_deleted_converges_when_frontend_gone", func(t *testing.T) {
		lt := NewLagTracker()
		lt.Record(Change{Service: model.ServiceName{Name: "s"}, Kind: ChangeRemove, T1: at(0), Previous: one, Desired: nil})
		if s := lt.Observe(obsOf(one), at(10)); len(s) != 0 {
			t.Fatal("converged while frontend remains")
		}
		if s := lt.Observe(obsOf(nil), at(20)); len(s) != 1 || s[0].NodeLag() != 20*time.Millisecond {
			t.Fatalf("samples %+v", s)
		}
	})
	t.Run("update_exact_T2", func(t *testing.T) {
		lt := NewLagTracker()
		swap := map[model.Frontend]model.Verdict{fe: fwd(be3)}
		lt.Record(Change{Service: model.ServiceName{Name: "s"}, Kind: ChangeUpdate, T0: at(-5), T1: at(0), Previous: one, Desired: swap})
		s := lt.Observe(obsOf(swap), at(70))
		if len(s) != 1 || s[0].Kind != ChangeUpdate || s[0].NodeLag() != 70*time.Millisecond {
			t.Fatalf("samples %+v", s)
		}
	})
	t.Run("superseded_measured_to_newest", func(t *testing.T) {
		lt := NewLagTracker()
		lt.Record(Change{Service: model.ServiceName{Name: "s"}, Kind: ChangeAdd, T0: at(-10), T1: at(0), Previous: one, Desired: two})
		lt.Record(Change{Service: model.ServiceName{Name: "s"}, Kind: ChangeAdd, T0: at(390), T1: at(400), Previous: two, Desired: three})
		if s := lt.Observe(obsOf(two), at(450)); len(s) != 0 {
			t.Fatal("intermediate state counted as converged")
		}
		s := lt.Observe(obsOf(three), at(600))
		if len(s) != 1 || s[0].NodeLag() != 200*time.Millisecond || s[0].Superseded != 1 {
			t.Fatalf("samples %+v", s)
		}
		if l, _ := s[0].NetworkLatency(); l != 210*time.Millisecond {
			t.Fatalf("latency %v", l)
		}
	})
	t.Run("observation_before_T1_ignored", func(t *testing.T) {
		lt := NewLagTracker()
		lt.Record(Change{Service: model.ServiceName{Name: "s"}, Kind: ChangeAdd, T1: at(100), Previous: one, Desired: two})
		if s := lt.Observe(obsOf(two), at(50)); len(s) != 0 {
			t.Fatal("observation older than the change used")
		}
	})
	t.Run("restart_has_no_samples", func(t *testing.T) {
		lt := NewLagTracker() // a fresh agent: nothing recorded before it started
		if s := lt.Observe(obsOf(two), at(0)); len(s) != 0 || len(lt.Pending()) != 0 {
			t.Fatal("samples without changes")
		}
	})
	t.Run("pending_oldest_first", func(t *testing.T) {
		lt := NewLagTracker()
		lt.Record(Change{Service: model.ServiceName{Name: "b"}, T1: at(200), Desired: one})
		lt.Record(Change{Service: model.ServiceName{Name: "a"}, T1: at(100), Desired: one})
		p := lt.Pending()
		if len(p) != 2 || p[0].Service.Name != "a" {
			t.Fatalf("pending %+v", p)
		}
	})
}

func TestFindingTracker(t *testing.T) {
	f := model.Finding{Kind: model.StaleBackend, Service: sp, Frontend: &fe, Backend: netip.MustParseAddrPort("10.1.0.9:80")}
	healthy := Proof{WatchHealthy: true}
	t.Run("pending_then_stale_after_stale_after", func(t *testing.T) {
		ft := NewFindingTracker(5 * time.Second)
		p := healthy
		p.Changed = map[model.ServiceName]bool{{Namespace: "shop", Name: "cart"}: true}
		ft.Update([]model.Finding{f}, at(0), p)
		ft.Update([]model.Finding{f}, at(4999), healthy)
		if len(ft.Stale()) != 0 || len(ft.Pending()) != 1 {
			t.Fatal("promoted before stale-after")
		}
		ft.Update([]model.Finding{f}, at(5000), healthy)
		st := ft.Stale()
		if len(st) != 1 || !st[0].FirstSeen.Equal(at(0)) || st[0].Age(at(6000)) != 6*time.Second {
			t.Fatalf("stale %+v", st)
		}
		ft.Update(nil, at(7000), healthy)
		if len(ft.Stale())+len(ft.Pending()) != 0 {
			t.Fatal("healed finding kept")
		}
	})
	t.Run("unproven_not_promoted_until_delivery", func(t *testing.T) {
		ft := NewFindingTracker(time.Second)
		ft.Update([]model.Finding{f}, at(0), healthy)
		ft.Update([]model.Finding{f}, at(3000), Proof{WatchHealthy: true, LastDelivery: at(-1)})
		if len(ft.Stale()) != 0 {
			t.Fatal("promoted without proof the view was current")
		}
		ft.Update([]model.Finding{f}, at(4000), Proof{WatchHealthy: true, LastDelivery: at(3500)})
		if len(ft.Stale()) != 1 {
			t.Fatal("not promoted after a later delivery")
		}
	})
	t.Run("unhealthy_watch_blocks_promotion", func(t *testing.T) {
		ft := NewFindingTracker(time.Second)
		p := Proof{WatchHealthy: false, LastDelivery: at(10), Changed: map[model.ServiceName]bool{{Namespace: "shop", Name: "cart"}: true}}
		ft.Update([]model.Finding{f}, at(0), p)
		ft.Update([]model.Finding{f}, at(30000), Proof{WatchHealthy: false, LastDelivery: at(10)})
		if len(ft.Stale()) != 0 {
			t.Fatal("promoted while the watch is unhealthy")
		}
		ft.Update([]model.Finding{f}, at(31000), Proof{WatchHealthy: true, LastDelivery: at(30500)})
		if len(ft.Stale()) != 1 {
			t.Fatal("not promoted after recovery")
		}
	})
}

func TestRemovedBackends(t *testing.T) {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	onPort := func(b netip.AddrPort, port uint16) netip.AddrPort { return netip.AddrPortFrom(b.Addr(), port) }
	cases := []struct {
		name       string
		prev, next map[model.Frontend]model.Verdict
		want       []netip.Addr
	}{
		{"one removed", map[model.Frontend]model.Verdict{fe: fwd(be1, be2, be3)}, map[model.Frontend]model.Verdict{fe: fwd(be2)},
			[]netip.Addr{a("10.1.0.1"), a("10.1.0.3")}},
		{"added only", map[model.Frontend]model.Verdict{fe: fwd(be1)}, map[model.Frontend]model.Verdict{fe: fwd(be1, be2)}, nil},
		// Still a backend of another frontend (or another port): not removed.
		{"kept elsewhere", map[model.Frontend]model.Verdict{fe: fwd(be1), np: fwd(be1)},
			map[model.Frontend]model.Verdict{np: fwd(onPort(be1, 9090))}, nil},
		{"service deleted", map[model.Frontend]model.Verdict{fe: fwd(be2), np: fwd(be2)}, nil, []netip.Addr{a("10.1.0.2")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := RemovedBackends(tc.prev, tc.next)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestLagSampleCarriesRemovalAndT0Source(t *testing.T) {
	tr := NewLagTracker()
	prev := map[model.Frontend]model.Verdict{fe: fwd(be1, be2)}
	next := map[model.Frontend]model.Verdict{fe: fwd(be1)}
	tr.Record(Change{Service: model.ServiceName{Namespace: "shop", Name: "cart"}, Kind: ChangeRemove, T1: at(100), Previous: prev, Desired: next})
	tr.Record(Change{Service: model.ServiceName{Namespace: "shop", Name: "web"}, Kind: ChangeRemove, T0: at(-900), T1: at(120), Previous: prev, Desired: next})
	got := tr.Observe(obsOf(next), at(300))
	if len(got) != 2 {
		t.Fatalf("samples %+v", got)
	}
	if s := got[0]; s.T0Source != "" || len(s.Removed) != 1 || s.Removed[0] != be2.Addr() {
		t.Errorf("cart (no trigger): T0Source %q Removed %v, want \"\" [10.1.0.2]", s.T0Source, s.Removed)
	}
	if s := got[1]; s.T0Source != T0Trigger || !s.T0.Equal(at(-900)) {
		t.Errorf("web: T0 %v source %q, want the trigger time", s.T0, s.T0Source)
	}
}

func TestLagTrackerDrop(t *testing.T) {
	tr := NewLagTracker()
	svc := model.ServiceName{Namespace: "shop", Name: "web"}
	if tr.Drop(svc) {
		t.Fatal("dropped a change that was never recorded")
	}
	tr.Record(Change{Service: svc, Kind: ChangeAdd, T1: time.Unix(100, 0)})
	if !tr.Drop(svc) || tr.Len() != 0 {
		t.Fatalf("Drop of a pending change: %d left", tr.Len())
	}
}
