package scenarios

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// settleWait is how long the agents take to settle a reset sent before any
// deletion request (rst.DefaultSettle, 15 s) plus their 1 s counter read.
const settleWait = 18 * time.Second

// testReadyRefusals: a Service whose target port no listener of its pod
// serves (the pod is Ready: its listener is closed while the readiness the
// kubelet reports still passes). Clients on every node are refused by the
// Ready endpoint; netdrift counts exactly those refusals as the new signal,
// none as a terminating pod's.
func testReadyRefusals(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	name := "deaf"
	sel := map[string]string{"app": name}
	svc, err := l.CreateService(ctx, labenv.ServiceSpec{Name: name, Selector: sel, TargetPort: labenv.DefaultPodPort + 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAll(l, name) })
	node := l.Nodes()[0].Name
	pod := createPod(t, l, name+"-a1", node, sel, 0)
	cip := svc.Spec.ClusterIP
	backend := fmt.Sprintf("%s:%d", pod.IP, labenv.DefaultPodPort+1)
	waitProgrammed(t, l, cip, []string{backend}, 60*time.Second)
	agents := agentsOf(t, l)
	key := "default/" + name
	waitConverged(t, agents, key, 60*time.Second)
	time.Sleep(2 * time.Second) // the agents write the endpoint's port into the probe every second

	var fleet Fleet
	for _, n := range l.Nodes() {
		fleet.Clients = append(fleet.Clients, &Client{Name: n.Name, Dial: dialIn(l, n.Name),
			Addr: cip + ":80", Interval: 5 * time.Millisecond, Timeout: time.Second})
	}
	fleet.Start(ctx)
	time.Sleep(3 * time.Second)
	clients, _ := fleet.Stop()
	t.Logf("clients of %s (Ready endpoint %s, no listener): %s", key, backend, clients)
	if clients.Refused == 0 {
		t.Fatalf("no connection refused: %s", clients)
	}
	time.Sleep(settleWait)
	var refusals, terminating, metric float64
	var unsettled uint64
	for _, a := range agents {
		var rep RSTReport
		if err := a.Get(ctx, "/v1/rsts", &rep); err != nil {
			t.Fatal(err)
		}
		m, err := a.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := m.Sum("netdrift_ready_endpoint_refusals_total", map[string]string{"namespace": "default", "service": name})
		b := rep.ByState[key]
		t.Logf("  agent %s: %+v unsettled %d; netdrift_ready_endpoint_refusals_total %.0f", a.Node, b, rep.Unsettled, v)
		refusals += float64(b.ReadyRefusals)
		terminating += float64(b.Terminating + b.Deleted)
		metric += v
		unsettled += rep.Unsettled
	}
	t.Logf("refused %d; counted ready refusals %.0f (/v1/rsts), %.0f (metric); terminating %.0f", clients.Refused,
		refusals, metric, terminating)
	// Equal, but for attempts the clients' stop cut short (their RST may
	// have been sent after the client stopped waiting: at most one a client).
	if refusals < float64(clients.Refused) || refusals > float64(clients.Refused+clients.Aborted) || metric != refusals {
		t.Errorf("ready refusals: /v1/rsts %.0f, metric %.0f; clients saw %d refused and %d attempts aborted by the stop: want /v1/rsts = metric, within [refused, refused+aborted]",
			refusals, metric, clients.Refused, clients.Aborted)
	}
	if terminating != 0 || unsettled != 0 {
		t.Errorf("terminating RSTs %.0f, unsettled %d: want 0", terminating, unsettled)
	}
	var view struct {
		RSTs   *RSTStateCounts `json:"rsts"`
		Advice []string        `json:"advice"`
	}
	if err := agent(t, l, node).Get(ctx, "/v1/services/"+key, &view); err != nil {
		t.Fatal(err)
	}
	if view.RSTs == nil || !strings.Contains(strings.Join(view.Advice, "\n"), "readiness probe does not cover the listener") {
		t.Errorf("explain %s on %s: rsts %+v advice %q: want the readiness advice", key, node, view.RSTs, view.Advice)
	}
	// Prometheus sees the refusals at once (the series is new: counted whole), and the
	// alert waits its `for` (make test-lab-alerts waits for it to fire).
	eventually(t, 30*time.Second, 500*time.Millisecond, "NetdriftReadyEndpointRefusals active for "+key, func() (bool, string) {
		as := alertsNow(t, promOf(l))
		for _, a := range Named(as, "NetdriftReadyEndpointRefusals", "") {
			if a.Labels["service"] == name {
				return true, ""
			}
		}
		return false, describe(as)
	})
}

// testRollout10: the rolling replacement without preStop, ten times: every
// run's counted terminating-pod refusals equal the clients' refused
// connections within ±1. The figures are logged as a table (and written to
// $NETDRIFT_ROLLOUT10_OUT when set). Slow: only with NETDRIFT_ROLLOUT10=1
// (make test-lab-rollout10).
func testRollout10(t *testing.T, e *env) {
	if os.Getenv("NETDRIFT_ROLLOUT10") == "" {
		t.Skip("set NETDRIFT_ROLLOUT10=1 (make test-lab-rollout10): ten rollouts take several minutes")
	}
	var table strings.Builder
	fmt.Fprintf(&table, "run  refused  counted  terminating_rsts  ready_refusals\n")
	for i := range 10 {
		r := rollout(t, e.lab, fmt.Sprintf("roll10-%d", i+1), 0)
		fmt.Fprintf(&table, "%3d  %7d  %7d  %16.0f  %14d\n", i+1, r.clients.Refused, r.refusals, r.rstMetric, r.readyRefusals)
		checkRolloutCounts(t, r)
		deleteAll(e.lab, fmt.Sprintf("roll10-%d", i+1))
	}
	t.Logf("rollout x10 (%s):\n%s", e.mode, table.String())
	if out := os.Getenv("NETDRIFT_ROLLOUT10_OUT"); out != "" {
		_ = os.WriteFile(out, []byte(table.String()), 0o644)
	}
}
