package scenarios

import (
	"context"
	"fmt"
	"math"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// rollout replaces every pod of a Service (one per node) while a client on
// every node connects to the ClusterIP in a loop, and returns what the
// clients saw and the RSTs the agents counted (metric, summed over nodes).
type rolloutResult struct {
	clients   Counts
	perClient map[string]Counts
	rstMetric float64
	rstAPI    uint64
	noSocket  int // RSTs with reason NO_SOCKET in /v1/rsts events
	// refusals are the agents' counted refusals (NO_SOCKET from the endpoint
	// port) by terminating and deleted pods, ready the same by Ready ones.
	refusals, readyRefusals uint64
	unsettled               uint64
	lag                     map[string][]LagSample // node -> remove samples of the service
}

func rollout(t *testing.T, l *labenv.Lab, name string, preStop time.Duration) rolloutResult {
	t.Helper()
	ctx := context.Background()
	var nodes []string
	for _, n := range l.Nodes() {
		nodes = append(nodes, n.Name)
	}
	cip, pods := service(t, l, name, nodes, preStop)
	agents := agentsOf(t, l)
	svc := "default/" + name
	waitConverged(t, agents, svc, 60*time.Second)
	start := time.Now()

	var fleet Fleet
	for _, n := range nodes {
		fleet.Clients = append(fleet.Clients, &Client{Name: n, Dial: dialIn(l, n),
			Addr: cip + ":80", Interval: 2 * time.Millisecond, Timeout: time.Second})
	}
	fleet.Start(ctx)
	time.Sleep(time.Second)
	sel := map[string]string{"app": name}
	cur := append([]podInfo(nil), pods...)
	for i, old := range pods {
		nu := createPod(t, l, fmt.Sprintf("%s-b%d", name, i+1), old.Node, sel, preStop)
		cur = append(cur, nu)
		waitProgrammed(t, l, cip, backendsOf(cur), 60*time.Second)
		if err := l.DeletePod(ctx, "default", old.Name, nil); err != nil {
			t.Fatal(err)
		}
		cur = without(cur, old.Name)
		waitProgrammed(t, l, cip, backendsOf(cur), 60*time.Second)
		if err := l.WaitPodGone(ctx, "default", old.Name, 90*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	var r rolloutResult
	r.clients, r.perClient = fleet.Stop()
	t.Logf("rollout of %s took %s; clients: %s", svc, time.Since(start).Round(time.Millisecond), r.clients)
	for n, c := range r.perClient {
		t.Logf("  client on %s: %s", n, c)
	}
	// The agents read the probe's counters every second.
	time.Sleep(2 * time.Second)
	r.lag = map[string][]LagSample{}
	for _, a := range agents {
		m, err := a.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := m.Sum("netdrift_terminating_rsts_total", map[string]string{"namespace": "default", "service": name})
		r.rstMetric += v
		if live, ok := m.Sum("go_gc_heap_live_bytes", nil); !ok || live <= 0 {
			t.Errorf("%s: no live heap in /metrics (go_gc_heap_live_bytes %v, found %v): the soak reads it", a.Node, live, ok)
		}
		var rep RSTReport
		if err := a.Get(ctx, "/v1/rsts", &rep); err != nil {
			t.Fatal(err)
		}
		if !rep.Probe.Up {
			t.Errorf("%s: RST probe not up: %s", a.Node, rep.Probe.Reason)
		}
		r.rstAPI += rep.Totals[svc]
		r.refusals += rep.ByState[svc].TerminatingRefusals
		r.readyRefusals += rep.ByState[svc].ReadyRefusals
		r.unsettled += rep.Unsettled
		reasons := map[string]int{}
		for _, ev := range rep.Events {
			if ev.Namespace+"/"+ev.Service == svc && ev.Direction == "sent_by_watched" && ev.Time.After(start) {
				reasons[ev.Reason]++
			}
		}
		// A SYN to a closed port is answered by a NO_SOCKET reset: that is
		// "connection refused". Other resets of a closing pod (e.g. the
		// accept queue's connections, aborted on close) hit connections
		// the clients here had already completed and closed.
		r.noSocket += reasons["NO_SOCKET"]
		if len(reasons) > 0 {
			t.Logf("  agent %s: RSTs sent by terminating %s pods by reason: %v", a.Node, svc, reasons)
		}
		var lag Lag
		if err := a.Get(ctx, "/v1/lag", &lag); err != nil {
			t.Fatal(err)
		}
		for _, s := range lag.Samples {
			if s.Service == svc && s.Change == "remove" && s.T1.After(start) {
				r.lag[a.Node] = append(r.lag[a.Node], s)
			}
		}
		t.Logf("  agent %s: RSTs metric %.0f, /v1/rsts %d %+v (unsettled %d), removal lag samples %d %s",
			a.Node, v, rep.Totals[svc], rep.ByState[svc], rep.Unsettled, len(r.lag[a.Node]), lagString(r.lag[a.Node]))
	}
	return r
}

func without(ps []podInfo, name string) []podInfo {
	var out []podInfo
	for _, p := range ps {
		if p.Name != name {
			out = append(out, p)
		}
	}
	return out
}

func dialIn(l *labenv.Lab, node string) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return l.DialContext(ctx, node, network, addr)
	}
}

func lagString(ss []LagSample) string {
	s := "["
	for i, x := range ss {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.0fms", x.NodeLagSeconds*1000)
		if x.NetworkLatencySeconds != nil {
			s += fmt.Sprintf("(T2-T0 %.0fms)", *x.NetworkLatencySeconds*1000)
		}
	}
	return s + "]"
}

// testRollout: a rolling replacement without preStop. Clients see
// connection refused while lagging nodes still send them to closed pods;
// the refusals netdrift counted for terminating pods (every node's probe
// watches the pods from their creation, so none is lost to watch delay)
// must equal the clients' within ±1, and every node must have removal lag
// samples.
func testRollout(t *testing.T, e *env) {
	r := rollout(t, e.lab, "roll", 0)
	if r.clients.OK == 0 {
		t.Fatalf("no client connection succeeded: %s", r.clients)
	}
	if r.clients.Refused == 0 {
		t.Errorf("no connection was refused during a rollout without preStop: the race this scenario measures did not happen")
	}
	checkRolloutCounts(t, r)
	var maxLag time.Duration
	for _, n := range e.lab.Nodes() {
		ss := r.lag[n.Name]
		if len(ss) == 0 {
			t.Errorf("%s: no removal lag sample (/v1/lag change=remove) for default/roll", n.Name)
		}
		for _, s := range ss {
			d := time.Duration(s.NodeLagSeconds * float64(time.Second))
			if s.NetworkLatencySeconds != nil {
				d = time.Duration(*s.NetworkLatencySeconds * float64(time.Second))
			}
			maxLag = max(maxLag, d)
		}
	}
	e.mu.Lock()
	e.removalLag = maxLag
	e.mu.Unlock()
	t.Logf("largest removal lag (T2-T0, or T2-T1) over nodes: %s", maxLag.Round(time.Millisecond))
	// What an SRE is paged with: the alert for the service, with the preStop advice.
	var desc string
	waitAlert(t, promOf(e.lab), "NetdriftTerminatingRSTs", 30*time.Second, func(as []PromAlert) (bool, string) {
		for _, a := range as {
			if a.Labels["service"] == "roll" {
				desc = a.Annotations["description"]
				return true, ""
			}
		}
		return false, describe(as)
	})
	t.Logf("NetdriftTerminatingRSTs: %s", desc)
	// Each node's counter series for the service appears with its first burst already in it:
	// what the alert counts (such a series whole) must be every reset the agents counted,
	// where increase() alone sees a flat series.
	sel := `netdrift_terminating_rsts_total{namespace="default",service="roll"}`
	gained := promValue(t, promOf(e.lab), fmt.Sprintf(`sum((%[1]s unless %[1]s offset 5m) or increase(%[1]s[5m]))`, sel))
	plain := promValue(t, promOf(e.lab), fmt.Sprintf(`sum(increase(%s[5m]))`, sel))
	t.Logf("resets of default/roll: agents %.0f; Prometheus, new series counted whole %.1f; increase() alone %.1f", r.rstMetric, gained, plain)
	if math.Abs(gained-r.rstMetric) > 1 {
		t.Errorf("the alert's count of default/roll's resets is %.1f, the agents counted %.0f", gained, r.rstMetric)
	}
	if !regexp.MustCompile(`Add a preStop hook that sleeps at least [0-9.]+ seconds`).MatchString(desc) {
		t.Errorf("NetdriftTerminatingRSTs gives no preStop figure: %q", desc)
	}
}

// testPreStop: the same rollout with a preStop sleep longer than the
// measured removal lag: no refused connection and no RST.
func testPreStop(t *testing.T, e *env) {
	e.mu.Lock()
	lag := e.removalLag
	e.mu.Unlock()
	if lag == 0 {
		lag = 2 * time.Second // rollout did not run: a generous guess
	}
	// Whole seconds (lifecycle.preStop.sleep), twice the lag plus 2 s: the
	// lag varies between rollouts on a loaded machine.
	preStop := time.Duration(math.Ceil((2*lag + 2*time.Second).Seconds())) * time.Second
	t.Logf("measured removal lag %s -> preStop sleep %s", lag.Round(time.Millisecond), preStop)
	r := rollout(t, e.lab, "calm", preStop)
	if r.clients.OK == 0 {
		t.Fatalf("no client connection succeeded: %s", r.clients)
	}
	if r.clients.Refused != 0 {
		t.Errorf("clients saw %d refused connections despite a %s preStop sleep (removal lag %s)", r.clients.Refused, preStop, lag)
	}
	if r.rstMetric != 0 || r.rstAPI != 0 || r.refusals != 0 || r.readyRefusals != 0 {
		t.Errorf("netdrift counted RSTs (metric %.0f, /v1/rsts %d, terminating refusals %d, ready refusals %d), want 0",
			r.rstMetric, r.rstAPI, r.refusals, r.readyRefusals)
	}
	if r.clients.Other != 0 {
		t.Logf("note: clients saw %d other errors (e.g. %s)", r.clients.Other, r.clients.FirstOther)
	}
}

// checkRolloutCounts: the counted terminating-pod refusals equal the
// clients' refused connections within ±1, the totals are not below them, and
// no Ready endpoint refused anyone.
func checkRolloutCounts(t *testing.T, r rolloutResult) {
	t.Helper()
	refused := uint64(r.clients.Refused)
	t.Logf("refused %d; counted terminating-pod refusals %d, terminating RSTs %.0f (metric) %d (/v1/rsts), ready refusals %d, "+
		"NO_SOCKET samples %d", refused, r.refusals, r.rstMetric, r.rstAPI, r.readyRefusals, r.noSocket)
	if d := int64(r.refusals) - int64(refused); d < -1 || d > 1 {
		t.Errorf("terminating-pod refusals counted over nodes %d, clients saw %d refused connections: want ±1", r.refusals, refused)
	}
	if r.rstMetric < float64(r.refusals) || r.rstAPI < r.refusals {
		t.Errorf("netdrift_terminating_rsts_total %.0f, /v1/rsts total %d: below the %d refusals", r.rstMetric, r.rstAPI, r.refusals)
	}
	if r.readyRefusals != 0 {
		t.Errorf("%d refusals counted as a Ready endpoint's during a rollout", r.readyRefusals)
	}
}
