package scenarios

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// falseFindings watches every node while a fault runs: each agent's
// promoted findings, and what kube-proxy programmed for the Services the
// fault changes (targets), both polled every 250 ms. A finding is false
// when the datapath never showed what it claims within the stale-after
// window before it was seen: a stale_backend whose backend no read found
// programmed, a missing_backend whose backend every read found programmed,
// a wrong_verdict "node does reject" when every read found backends (or
// "node does forward" when none did), an orphan_link whose interface was
// not there, or any finding about another Service or of another kind.
type falseFindings struct {
	l       *labenv.Lab
	targets map[string]target
	stop    context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	polls   map[string]map[string][]programmedAt // node, service
	seen    map[string][]seenFinding
}

// target is a Service a fault changes: its ClusterIP frontend.
type target struct {
	svc  string // "namespace/name"
	cip  string
	port int
}

type programmedAt struct {
	at       time.Time
	backends []string
}

type seenFinding struct {
	at time.Time
	f  Finding
	// linkThere: for an orphan_link, whether the interface it names was
	// there when the finding was seen
	linkThere bool
}

// watchFindings starts the pollers; stop them with done.
func watchFindings(t *testing.T, l *labenv.Lab, agents []*Agent, targets ...target) *falseFindings {
	ctx, cancel := context.WithCancel(context.Background())
	w := &falseFindings{l: l, targets: map[string]target{}, stop: cancel,
		polls: map[string]map[string][]programmedAt{}, seen: map[string][]seenFinding{}}
	for _, tg := range targets {
		w.targets[tg.svc] = tg
	}
	for _, a := range agents {
		w.polls[a.Node] = map[string][]programmedAt{}
	}
	for _, a := range agents {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for ctx.Err() == nil {
				w.poll(ctx, a)
				time.Sleep(250 * time.Millisecond)
			}
		}()
	}
	t.Cleanup(w.done)
	return w
}

func (w *falseFindings) poll(ctx context.Context, a *Agent) {
	var d Drift
	err := a.Get(ctx, "/v1/drift", &d)
	progs := map[string][]string{}
	for svc, tg := range w.targets {
		if got, perr := w.l.ProgrammedBackends(a.Node, tg.cip, tg.port); perr == nil {
			progs[svc] = got
		}
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for svc, got := range progs {
		w.polls[a.Node][svc] = append(w.polls[a.Node][svc], programmedAt{at: now, backends: got})
	}
	if err != nil { // an agent that is down answers nothing, and claims nothing
		return
	}
	for _, f := range d.Findings {
		sf := seenFinding{at: now, f: f}
		if fs := strings.Fields(f.Subject); f.Kind == "orphan_link" && len(fs) > 0 {
			_, lerr := w.l.Exec(a.Node, "ip", "link", "show", fs[0])
			sf.linkThere = lerr == nil
		}
		w.seen[a.Node] = append(w.seen[a.Node], sf)
	}
}

// done stops the pollers (idempotent).
func (w *falseFindings) done() {
	w.stop()
	w.wg.Wait()
}

// check fails t for every false finding, and logs the true ones.
func (w *falseFindings) check(t *testing.T) {
	t.Helper()
	w.done()
	w.mu.Lock()
	defer w.mu.Unlock()
	for node, seen := range w.seen {
		reported := map[string]bool{}
		for _, s := range seen {
			why := w.falseBecause(node, s)
			key := s.f.Kind + " " + s.f.Service + " " + s.f.Backend + s.f.Subject
			if reported[key] {
				continue
			}
			reported[key] = true
			if why != "" {
				t.Errorf("%s: false finding %s (%s) seen at %s: %s", node, key, s.f.Detail, s.at.Format("15:04:05.000"), why)
			} else {
				t.Logf("%s: true finding %s (kube-proxy's rules showed it): %s", node, key, s.f.Detail)
			}
		}
	}
}

// falseBecause says why a finding is false ("" when the datapath polls
// bear it out).
func (w *falseFindings) falseBecause(node string, s seenFinding) string {
	if s.f.Kind == "orphan_link" {
		// A pod deleted just before the API server stops may keep its
		// interface until the kubelet hears of the deletion: true if the
		// interface was there at some sighting of the finding.
		for _, o := range w.seen[node] {
			if o.f.Kind == s.f.Kind && o.f.Subject == s.f.Subject && o.linkThere {
				return ""
			}
		}
		return "the interface was not there at any of its sightings"
	}
	if _, ok := w.targets[s.f.Service]; !ok {
		return "about a Service the fault did not change"
	}
	from := s.at.Add(-staleAfter)
	var window []programmedAt
	for _, p := range w.polls[node][s.f.Service] {
		if !p.at.Before(from) && !p.at.After(s.at) {
			window = append(window, p)
		}
	}
	if len(window) == 0 {
		return ""
	}
	held, none := 0, 0
	for _, p := range window {
		if slices.Contains(p.backends, s.f.Backend) {
			held++
		}
		if len(p.backends) == 0 {
			none++
		}
	}
	n := len(window)
	switch {
	case s.f.Kind == "stale_backend" && held == 0:
		return fmt.Sprintf("kube-proxy's rules did not hold %s in any of %d reads of the %s before", s.f.Backend, n, staleAfter)
	case s.f.Kind == "missing_backend" && held == n:
		return fmt.Sprintf("kube-proxy's rules held %s in all %d reads of the %s before", s.f.Backend, n, staleAfter)
	case s.f.Kind == "wrong_verdict" && strings.Contains(s.f.Detail, "node does reject") && none == 0:
		return fmt.Sprintf("kube-proxy's rules forwarded in all %d reads of the %s before", n, staleAfter)
	case s.f.Kind == "wrong_verdict" && strings.Contains(s.f.Detail, "node does forward") && none == n:
		return fmt.Sprintf("kube-proxy's rules forwarded in none of %d reads of the %s before", n, staleAfter)
	case s.f.Kind != "stale_backend" && s.f.Kind != "missing_backend" && s.f.Kind != "wrong_verdict":
		return "the fault changes backends only"
	}
	return ""
}

// lagSince is node's lag samples of svc delivered after since.
func lagSince(ctx context.Context, a *Agent, svc string, since time.Time) ([]LagSample, []string, error) {
	var lag Lag
	if err := a.Get(ctx, "/v1/lag", &lag); err != nil {
		return nil, nil, err
	}
	var out []LagSample
	for _, s := range lag.Samples {
		if s.Service == svc && s.T1.After(since) {
			out = append(out, s)
		}
	}
	var pend []string
	for _, p := range lag.Pending {
		if p.Service == svc {
			pend = append(pend, p.Change)
		}
	}
	return out, pend, nil
}

// changesMeasured is how many changes samples account for: each sample's
// own, and the older ones it superseded.
func changesMeasured(samples []LagSample) int {
	n := 0
	for _, s := range samples {
		n += 1 + s.Superseded
	}
	return n
}

func describeSamples(samples []LagSample) string {
	var b strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&b, "[%s T1 %s lag %.3fs superseded %d] ", s.Change, s.T1.Format("15:04:05.000"), s.NodeLagSeconds, s.Superseded)
	}
	return b.String()
}

// waitChangesMeasured waits until a's samples of svc delivered after since
// account for want changes and none is pending, and fails if they account
// for more.
func waitChangesMeasured(t *testing.T, a *Agent, svc string, since time.Time, want int, timeout time.Duration) []LagSample {
	t.Helper()
	var got []LagSample
	eventually(t, timeout, 250*time.Millisecond, fmt.Sprintf("%s: %d changes of %s measured", a.Node, want, svc), func() (bool, string) {
		s, pend, err := lagSince(context.Background(), a, svc, since)
		if err != nil {
			return false, err.Error()
		}
		got = s
		return changesMeasured(s) >= want && len(pend) == 0, fmt.Sprintf("samples %s pending %v", describeSamples(s), pend)
	})
	if n := changesMeasured(got); n != want {
		t.Errorf("%s: samples of %s account for %d changes, want %d: %s", a.Node, svc, n, want, describeSamples(got))
	}
	return got
}

// metricOf is the sum of a metric's series matching match on a's /metrics.
func metricOf(t *testing.T, a *Agent, name string, match map[string]string) float64 {
	t.Helper()
	m, err := a.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m.Sum(name, match)
	if !ok {
		t.Fatalf("%s: no %s in /metrics", a.Node, name)
	}
	return v
}

// programmedOn waits until node's kube-proxy programs want for cip:80.
func programmedOn(t *testing.T, l *labenv.Lab, node, cip string, want []string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, 200*time.Millisecond, node+": kube-proxy programs "+cip, func() (bool, string) {
		got, err := l.ProgrammedBackends(node, cip, 80)
		return err == nil && equal(got, want), fmt.Sprintf("got %v (err %v), want %v", got, err, want)
	})
}

// noFindingFor checks that a reports no finding at all for d (polled every
// 250 ms, at least once).
func noFindingFor(t *testing.T, a *Agent, d time.Duration, what string) {
	t.Helper()
	for end := time.Now().Add(d); ; time.Sleep(250 * time.Millisecond) {
		var dr Drift
		if err := a.Get(context.Background(), "/v1/drift", &dr); err != nil {
			t.Fatalf("%s: %v", a.Node, err)
		}
		if len(dr.Findings) > 0 {
			t.Errorf("%s: %s: findings %s", a.Node, what, kinds(dr.Findings))
			return
		}
		if time.Now().After(end) {
			return
		}
	}
}

// waitKubeProxySync waits until node's kube-proxy logs a sync completed
// after after: StartKubeProxy returns once the old rules answer, which a
// restarted kube-proxy left in place, before its own first sync.
func waitKubeProxySync(t *testing.T, l *labenv.Lab, node string, after time.Time) time.Time {
	t.Helper()
	var done time.Time
	eventually(t, 60*time.Second, 200*time.Millisecond, node+": kube-proxy syncs after its restart", func() (bool, string) {
		f, err := os.Open(l.LogPath("kube-proxy/" + node))
		if err != nil {
			return false, err.Error()
		}
		defer f.Close()
		syncs, err := ParseSyncs(f, after.Year(), time.Local)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range syncs {
			if s.Complete.After(after) {
				done = s.Complete
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d syncs logged, none completed after %s", len(syncs), after.Format("15:04:05.000"))
	})
	return done
}
