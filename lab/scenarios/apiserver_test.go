package scenarios

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
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
	_, _ = service(t, l, "api", []string{"node-2"}, 0)
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
	// And a change made now is tracked on every node.
	p := createPod(t, l, "api-new", "node-1", map[string]string{"app": "api"}, 0)
	created := time.Now()
	for _, a := range agents {
		eventually(t, 60*time.Second, 200*time.Millisecond, a.Node+": new change tracked", func() (bool, string) {
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
		t.Logf("%s: the change adding %s tracked %s after the pod was running", a.Node, p.IP, time.Since(created).Round(time.Millisecond))
	}
}
