package scenarios

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// testFrozen: kube-proxy on node-1 is stopped (SIGSTOP) while a backend is
// deleted. node-1's agent reports stale_backend within --stale-after + 1 s
// of first seeing the mismatch, its oldest pending change grows; the other
// nodes report nothing; after SIGCONT the finding clears and node-1's lag
// sample is about the time the change spent waiting for the frozen proxy.
func testFrozen(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	frozen := "node-1"
	cip, pods := service(t, l, "frz", []string{"node-2", "node-3"}, 0)
	agents := agentsOf(t, l)
	svc := "default/frz"
	waitConverged(t, agents, svc, 60*time.Second)

	if err := l.FreezeKubeProxy(frozen); err != nil {
		t.Fatal(err)
	}
	frozeAt := time.Now()
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_ = l.ThawKubeProxy(frozen)
		}
	})
	victim := pods[0]
	if err := l.DeletePod(ctx, "default", victim.Name, nil); err != nil {
		t.Fatal(err)
	}
	deletedAt := time.Now()
	byNode := map[string]*Agent{}
	for _, a := range agents {
		byNode[a.Node] = a
	}

	// The finding on the frozen node, timed against its own first sighting.
	var found Finding
	eventually(t, 30*time.Second, 100*time.Millisecond, frozen+": stale_backend for "+svc, func() (bool, string) {
		var d Drift
		if err := byNode[frozen].Get(ctx, "/v1/drift", &d); err != nil {
			return false, err.Error()
		}
		for _, f := range findingsOf(d, "stale_backend", svc) {
			if f.Backend == victim.backend() {
				found = f
				return true, ""
			}
		}
		return false, "findings " + kinds(d.Findings) + ", pending " + kinds(d.Pending)
	})
	seenAt := time.Now()
	if found.FirstSeen == nil {
		t.Fatalf("finding has no first_seen: %+v", found)
	}
	t.Logf("%s: stale_backend %s reported %s after the delete; mismatch first seen %s after the delete, promoted after %s",
		frozen, found.Backend, seenAt.Sub(deletedAt).Round(time.Millisecond),
		found.FirstSeen.Sub(deletedAt).Round(time.Millisecond), seenAt.Sub(*found.FirstSeen).Round(time.Millisecond))
	if got := seenAt.Sub(*found.FirstSeen); got > staleAfter+time.Second {
		t.Errorf("stale_backend reported %s after the mismatch was first seen; want within --stale-after (%s) + 1 s", got, staleAfter)
	}
	if got := found.FirstSeen.Sub(deletedAt); got > 5*time.Second {
		t.Errorf("the mismatch was first seen %s after the delete (watch and slice controller delay); want < 5 s", got)
	}

	// Is anyone hurt? A client on the frozen node keeps connecting: every
	// attempt its kube-proxy rules send to the deleted backend fails, and is
	// one new connection the finding counts.
	conns := func() uint64 {
		var d Drift
		if err := byNode[frozen].Get(ctx, "/v1/drift", &d); err != nil {
			t.Fatal(err)
		}
		for _, f := range findingsOf(d, "stale_backend", svc) {
			if f.Backend == victim.backend() && f.Connections != nil {
				return *f.Connections
			}
		}
		t.Fatalf("%s: the stale_backend finding has no connections count: %+v", frozen, d.Findings)
		return 0
	}
	before := conns()
	hurtFleet := Fleet{Clients: []*Client{{Name: frozen, Dial: dialIn(l, frozen), Addr: cip + ":80",
		Interval: 20 * time.Millisecond, Timeout: 300 * time.Millisecond}}}
	hurtFleet.Start(ctx)
	time.Sleep(3 * time.Second)
	hurtClients, _ := hurtFleet.Stop()
	time.Sleep(time.Second) // conntrack events are asynchronous
	counted := conns() - before
	t.Logf("%s: clients %s; the finding counted %d new connections to %s", frozen, hurtClients, counted, victim.backend())
	// The attempt in flight when the client stops sent its SYN but has no
	// outcome: it may be one more.
	failed := uint64(hurtClients.Other + hurtClients.Refused)
	if failed == 0 || counted < failed || counted > failed+1 {
		t.Errorf("%s: the stale finding counted %d new connections; the client's failed attempts (sent to the deleted backend) were %d (+1 in flight at the stop)",
			frozen, counted, failed)
	}

	// The oldest pending change grows while kube-proxy stays frozen.
	p1 := pendingAge(t, byNode[frozen])
	time.Sleep(1500 * time.Millisecond)
	p2 := pendingAge(t, byNode[frozen])
	t.Logf("%s: netdrift_oldest_pending_change_seconds %.2f -> %.2f", frozen, p1, p2)
	if p1 <= 0 || p2 < p1+1 {
		t.Errorf("netdrift_oldest_pending_change_seconds did not grow: %.2f then %.2f 1.5 s later", p1, p2)
	}
	// The other nodes programmed the removal: no finding, nothing pending.
	for _, a := range agents {
		if a.Node == frozen {
			continue
		}
		var d Drift
		if err := a.Get(ctx, "/v1/drift", &d); err != nil {
			t.Fatal(err)
		}
		if fs := findingsOf(d, "", svc); len(fs) > 0 {
			t.Errorf("%s reports %s for %s while only %s is frozen", a.Node, kinds(fs), svc, frozen)
		}
		if v := pendingAge(t, a); v > 0 {
			t.Logf("note: %s has a pending change %.2f s old", a.Node, v)
		}
	}

	// The finding stays while kube-proxy stays frozen.
	until := time.Now().Add(2 * time.Second)
	for time.Now().Before(until) {
		var d Drift
		if err := byNode[frozen].Get(ctx, "/v1/drift", &d); err != nil {
			t.Fatal(err)
		}
		if len(findingsOf(d, "stale_backend", svc)) == 0 {
			t.Errorf("%s: stale_backend for %s disappeared while kube-proxy was still frozen: findings %s pending %s",
				frozen, svc, kinds(d.Findings), kinds(d.Pending))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := l.ThawKubeProxy(frozen); err != nil {
		t.Fatal(err)
	}
	thawed = true
	thawAt := time.Now()
	t.Logf("kube-proxy on %s frozen for %s", frozen, thawAt.Sub(frozeAt).Round(time.Millisecond))
	cleared := eventually(t, 20*time.Second, 100*time.Millisecond, frozen+": finding clears", func() (bool, string) {
		var d Drift
		var lag Lag
		if err := byNode[frozen].Get(ctx, "/v1/drift", &d); err != nil {
			return false, err.Error()
		}
		if err := byNode[frozen].Get(ctx, "/v1/lag", &lag); err != nil {
			return false, err.Error()
		}
		var pend []string
		for _, p := range lag.Pending {
			if p.Service == svc {
				pend = append(pend, p.Change)
			}
		}
		fs := append(findingsOf(d, "", svc), d.Pending...)
		return len(fs) == 0 && len(pend) == 0, fmt.Sprintf("findings/mismatches %s, pending changes %v", kinds(fs), pend)
	})
	t.Logf("%s: finding cleared %s after SIGCONT", frozen, cleared.Round(time.Millisecond))
	_ = cip

	var lag Lag
	if err := byNode[frozen].Get(ctx, "/v1/lag", &lag); err != nil {
		t.Fatal(err)
	}
	var sample *LagSample
	for i, s := range lag.Samples {
		if s.Service == svc && s.Change == "remove" && s.T1.After(frozeAt) {
			sample = &lag.Samples[i]
		}
	}
	if sample == nil {
		t.Fatalf("%s: no removal lag sample for %s after the thaw", frozen, svc)
	}
	waited := thawAt.Sub(sample.T1) // how long the change waited for the frozen proxy
	got := time.Duration(sample.NodeLagSeconds * float64(time.Second))
	t.Logf("%s: lag sample T2-T1 %s; the change waited %s for the frozen kube-proxy (frozen %s in all)",
		frozen, got.Round(time.Millisecond), waited.Round(time.Millisecond), thawAt.Sub(frozeAt).Round(time.Millisecond))
	// After SIGCONT kube-proxy syncs at once (its min sync period has long
	// passed); allow 1.5 s for that sync on a loaded machine.
	if got < waited-200*time.Millisecond || got > waited+1500*time.Millisecond {
		t.Errorf("lag sample %s, want about the freeze time %s (-0.2 s/+1.5 s)", got, waited)
	}
}

func pendingAge(t *testing.T, a *Agent) float64 {
	t.Helper()
	m, err := a.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m.Sum("netdrift_oldest_pending_change_seconds", nil)
	if !ok {
		t.Fatalf("%s: no netdrift_oldest_pending_change_seconds in /metrics", a.Node)
	}
	return v
}

func kinds(fs []Finding) string {
	s := "["
	for i, f := range fs {
		if i > 0 {
			s += " "
		}
		s += f.Kind + ":" + f.Service + ":" + f.Backend + f.Subject
	}
	return s + "]"
}
