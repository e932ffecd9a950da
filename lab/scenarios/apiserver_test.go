package scenarios

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// outage is how long the API server stays down.
const outage = 30 * time.Second

// testAPIServerDown: the API server stops for 30 s. Every agent reports
// netdrift_watch_healthy 0, none raises a stale finding meanwhile, and all
// recover (healthy, ready, a new change tracked on every node) within 10 s
// of the API server's return.
func testAPIServerDown(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	cip, pods := service(t, l, "api", []string{"node-2"}, 0)
	agents := agentsOf(t, l)
	waitConverged(t, agents, "default/api", 60*time.Second)

	type obs struct {
		unhealthy bool
		findings  []string
	}
	var mu sync.Mutex
	seen := map[string]*obs{}
	for _, a := range agents {
		seen[a.Node] = &obs{}
	}
	pollCtx, stopPoll := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				m, err := a.Metrics(pollCtx)
				var d Drift
				if err == nil {
					err = a.Get(pollCtx, "/v1/drift", &d)
				}
				if err == nil {
					h, _ := m.Sum("netdrift_watch_healthy", nil)
					f, _ := m.Sum("netdrift_findings", nil)
					mu.Lock()
					if h == 0 {
						seen[a.Node].unhealthy = true
					}
					for _, x := range d.Findings {
						seen[a.Node].findings = append(seen[a.Node].findings, x.Kind+" "+x.Detail)
					}
					if f > 0 && len(d.Findings) == 0 {
						seen[a.Node].findings = append(seen[a.Node].findings, fmt.Sprintf("netdrift_findings %v", f))
					}
					mu.Unlock()
				}
				time.Sleep(500 * time.Millisecond)
			}
		}()
	}
	if err := l.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = l.StartAPIServer(context.Background())
		}
	})
	time.Sleep(outage - time.Since(stoppedAt))
	mu.Lock()
	for n, o := range seen {
		if !o.unhealthy {
			t.Errorf("%s: netdrift_watch_healthy never 0 during a %s API server outage (--watch-unhealthy-after %s)", n, outage, watchUnhealthyAfter)
		}
		if len(o.findings) > 0 {
			t.Errorf("%s: stale findings while the API server was down: %v", n, o.findings)
		}
	}
	mu.Unlock()
	stopPoll()
	wg.Wait()

	if err := l.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	backAt := time.Now()
	t.Logf("API server down %s, ready again", backAt.Sub(stoppedAt).Round(time.Millisecond))
	// Full recovery: healthy watch, ready, no finding, on every node.
	for _, a := range agents {
		lastLog := time.Now()
		eventually(t, 60*time.Second, 200*time.Millisecond, a.Node+": recovery", func() (bool, string) {
			var st Status
			if err := a.Get(ctx, "/v1/status", &st); err != nil {
				return false, err.Error()
			}
			m, err := a.Metrics(ctx)
			if err != nil {
				return false, err.Error()
			}
			h, _ := m.Sum("netdrift_watch_healthy", nil)
			lease, _ := m.Sum("netdrift_watch_last_lease_delivery_age_seconds", nil)
			if time.Since(lastLog) > 5*time.Second {
				lastLog = time.Now()
				t.Logf("  %s %s after the return: watch_healthy %v, last Lease delivery %.1f s ago (%s)", a.Node,
					time.Since(backAt).Round(time.Second), h, lease, st.Watch.Reason)
			}
			return h == 1 && st.Ready && st.Findings == 0, fmt.Sprintf("watch_healthy %v ready %v findings %d (%s; %s)",
				h, st.Ready, st.Findings, st.Watch.Reason, st.ReadyReason)
		})
		since := time.Since(backAt)
		t.Logf("%s: recovered (watch healthy, ready, no finding) %s after the API server returned", a.Node, since.Round(time.Millisecond))
		if since > 10*time.Second {
			t.Errorf("%s: full recovery took %s after the API server returned, want <= 10 s", a.Node, since.Round(time.Millisecond))
		}
	}
	// A change made now is tracked on every node (kube-proxy may take a while).
	created := time.Now()
	p := createPod(t, l, "api-new", "node-1", map[string]string{"app": "api"}, 0)
	kubeProxyCatchUp(t, l, agents, "default/api", cip, backendsOf(append(pods, p)), created)
	for _, a := range agents {
		eventually(t, 30*time.Second, 200*time.Millisecond, a.Node+": new change tracked", func() (bool, string) {
			var lag Lag
			if err := a.Get(ctx, "/v1/lag", &lag); err != nil {
				return false, err.Error()
			}
			for _, s := range lag.Samples {
				if s.Service == "default/api" && s.Change == "add" && s.T1.After(backAt) {
					return true, ""
				}
			}
			return false, "no lag sample yet for the change adding " + p.IP
		})
	}
}

// kubeProxyCatchUp: kube-proxy's own informers back off after an outage
// (client-go: up to 30-60 s between attempts), so a change made right after
// the API server returned may reach some nodes' datapath long after the
// agents saw it. netdrift must report that as a stale finding on those nodes
// while it lasts (and nothing once kube-proxy caught up).
func kubeProxyCatchUp(t *testing.T, l *labenv.Lab, agents []*Agent, svc, cip string, want []string, since time.Time) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reported := ""
			for time.Since(since) < 150*time.Second {
				got, err := l.ProgrammedBackends(a.Node, cip, 80)
				if err == nil && equal(got, want) {
					programmed := time.Now()
					// The agent's delivery of the change (T1) starts kube-proxy's
					// share: the controller manager's informers back off too.
					t1 := agentDelivery(ctx, a, svc, since)
					told := "not seen"
					if !t1.IsZero() {
						told = t1.Sub(since).Round(100*time.Millisecond).String() + " after it was made"
					}
					t.Logf("%s: kube-proxy programmed the change %s after it was made (the agent's watch delivered it: %s); netdrift reported meanwhile: %s",
						a.Node, programmed.Sub(since).Round(100*time.Millisecond), told, orNone(reported))
					if !t1.IsZero() && programmed.Sub(t1) > staleAfter+3*time.Second && reported == "" {
						t.Errorf("%s: kube-proxy lagged %s behind the watch but netdrift reported no stale finding for %s",
							a.Node, programmed.Sub(t1).Round(time.Second), svc)
					}
					return
				}
				var d Drift
				if a.Get(ctx, "/v1/drift", &d) == nil && reported == "" {
					for _, f := range d.Findings {
						if f.Service == svc {
							reported = f.Kind + " " + f.Backend + " after " + time.Since(since).Round(100*time.Millisecond).String()
						}
					}
				}
				time.Sleep(250 * time.Millisecond)
			}
			t.Errorf("%s: kube-proxy did not program %s %v within 150 s", a.Node, svc, want)
		}()
	}
	wg.Wait()
}

// agentDelivery is T1 of the agent's lag sample for an add to svc after
// since (zero when none shows up within 5 s).
func agentDelivery(ctx context.Context, a *Agent, svc string, since time.Time) time.Time {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		var lag Lag
		if a.Get(ctx, "/v1/lag", &lag) != nil {
			continue
		}
		for _, s := range lag.Samples {
			if s.Service == svc && s.Change == "add" && s.T1.After(since) {
				return s.T1
			}
		}
	}
	return time.Time{}
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}
