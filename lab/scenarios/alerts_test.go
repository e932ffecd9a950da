package scenarios

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// The alert scenarios assert through the lab Prometheus' HTTP API, which
// scrapes every agent and kube-proxy and evaluates deploy/'s rules file
// unmodified. An alert's `for` is waited out in full (NetdriftStaleDNAT 2m,
// the watch alerts 2m); only the scrape and evaluation interval is short
// (labenv default 2s).

// promOf is a client of the lab's Prometheus.
func promOf(l *labenv.Lab) *Prom {
	return &Prom{Base: l.PrometheusURL(), HTTP: l.PrometheusHTTPClient()}
}

// alertsNow fetches the active alerts or fails the test.
func alertsNow(t *testing.T, p *Prom) []PromAlert {
	t.Helper()
	as, _, err := p.Alerts(context.Background())
	if err != nil {
		t.Fatalf("prometheus /api/v1/alerts: %v", err)
	}
	return as
}

func describe(as []PromAlert) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%s{node=%q,service=%q}=%s", a.Labels["alertname"], a.Labels["node"], a.Labels["service"], a.State))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// waitAlert polls until an alert called name is firing and match accepts
// the firing set; it returns them and when they were seen.
func waitAlert(t *testing.T, p *Prom, name string, timeout time.Duration, match func([]PromAlert) (bool, string)) ([]PromAlert, time.Time) {
	t.Helper()
	var got []PromAlert
	eventually(t, timeout, 500*time.Millisecond, name+" firing", func() (bool, string) {
		as := alertsNow(t, p)
		got = Named(as, name, "firing")
		if len(got) == 0 {
			return false, "active alerts " + describe(as)
		}
		return match(got)
	})
	return got, time.Now()
}

func forOf(t *testing.T, alert string) time.Duration {
	t.Helper()
	b, err := os.ReadFile(labenv.DefaultRulesFile())
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?s)- alert: ` + alert + `\n.*?\n        for: (\w+)\n`)
	m := re.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no `for` of %s in %s", alert, labenv.DefaultRulesFile())
	}
	d, err := time.ParseDuration(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// testQuiet: a clean run with churn (pods replaced with a preStop longer
// than the removal lag, a Service created and deleted) raises no alert,
// not even a pending one.
func testQuiet(t *testing.T, e *env) {
	l := e.lab
	p := promOf(l)
	ctx := context.Background()
	var nodes []string
	for _, n := range l.Nodes() {
		nodes = append(nodes, n.Name)
	}
	// From the first scrape of every target on: before it, absent(up{job="netdrift"})
	// rightly holds NetdriftAgentDown pending.
	eventually(t, 30*time.Second, 500*time.Millisecond, "every target scraped", func() (bool, string) {
		up, err := p.Query(ctx, `count(up == 1)`)
		return err == nil && len(up) == 1 && up[0].Value[1] == fmt.Sprint(2*len(nodes)), fmt.Sprintf("%v %v", up, err)
	})
	time.Sleep(2 * l.ScrapeInterval()) // a rule evaluation after that scrape
	stop := make(chan struct{})
	seen := make(chan []PromAlert, 1)
	go func() {
		var bad []PromAlert
		for {
			select {
			case <-stop:
				seen <- bad
				return
			case <-time.After(time.Second):
			}
			if as, _, err := p.Alerts(ctx); err == nil && len(as) > 0 && bad == nil {
				bad = as
			}
		}
	}()
	cip, pods := service(t, l, "calm", nodes, 5*time.Second)
	sel := map[string]string{"app": "calm"}
	cur := append([]podInfo(nil), pods...)
	for i, old := range pods {
		nu := createPod(t, l, fmt.Sprintf("calm-b%d", i+1), old.Node, sel, 5*time.Second)
		cur = append(cur, nu)
		waitProgrammed(t, l, cip, backendsOf(cur), 60*time.Second)
		if err := l.DeletePod(ctx, "default", old.Name, nil); err != nil {
			t.Fatal(err)
		}
		cur = without(cur, old.Name)
		waitProgrammed(t, l, cip, backendsOf(cur), 60*time.Second)
	}
	waitConverged(t, agentsOf(t, l), "default/calm", 60*time.Second)
	time.Sleep(3 * l.ScrapeInterval())
	close(stop)
	if bad := <-seen; len(bad) > 0 {
		t.Errorf("alerts during a clean run with churn: %s", describe(bad))
	}
	// The run was watched: every target was up and the rules evaluated.
	up, err := p.Query(ctx, `count(up == 1)`)
	if err != nil || len(up) != 1 || up[0].Value[1] != fmt.Sprint(2*len(nodes)) {
		t.Errorf("up targets: %v %v, want %d (agents and kube-proxies)", up, err, 2*len(nodes))
	}
}

// testStaleDNATAlert: kube-proxy on node-1 frozen while a backend is
// deleted. NetdriftStaleDNAT fires for node-1 only, within its `for` plus
// two scrape intervals (and one evaluation) of the agent reporting the
// finding, and resolves after the thaw.
func testStaleDNATAlert(t *testing.T, e *env) {
	l := e.lab
	p := promOf(l)
	ctx := context.Background()
	frozen := "node-1"
	defer watchStaleFrontends(t, l, 15*time.Second)()
	captured := false
	_, pods := service(t, l, "frza", []string{"node-2", "node-3"}, 0)
	a := agent(t, l, frozen)
	waitConverged(t, agentsOf(t, l), "default/frza", 60*time.Second)
	if err := l.FreezeKubeProxy(frozen); err != nil {
		t.Fatal(err)
	}
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_ = l.ThawKubeProxy(frozen)
		}
	})
	if err := l.DeletePod(ctx, "default", pods[0].Name, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, 100*time.Millisecond, frozen+": stale_backend", func() (bool, string) {
		var d Drift
		if err := a.Get(ctx, "/v1/drift", &d); err != nil {
			return false, err.Error()
		}
		return len(findingsOf(d, "stale_backend", "default/frza")) > 0, "findings " + kinds(d.Findings)
	})
	reported := time.Now()
	forDur, iv := forOf(t, "NetdriftStaleDNAT"), l.ScrapeInterval()
	bound := forDur + 2*iv + iv // two scrapes to see it, one evaluation to act
	fired, firedAt := waitAlert(t, p, "NetdriftStaleDNAT", bound+30*time.Second, func(as []PromAlert) (bool, string) {
		for _, a := range as {
			if n := a.Labels["node"]; n != frozen {
				var d Drift
				err := agent(t, l, n).Get(ctx, "/v1/drift", &d)
				if !captured {
					captured = captureStaleFrontends(t, l, agentsOf(t, l), "fires for "+n) != ""
				}
				return false, fmt.Sprintf("fires for another node: %s (kind %s); %s's findings: %s %v", describe(as), a.Labels["kind"], n, kinds(d.Findings), err)
			}
		}
		return true, ""
	})
	took := firedAt.Sub(reported)
	if _, raw, err := p.Alerts(ctx); err == nil {
		t.Logf("/api/v1/alerts as Prometheus reported it: %s", raw)
	}
	if series, err := p.Query(ctx, `ALERTS{alertname="NetdriftStaleDNAT"}`); err == nil {
		t.Logf("ALERTS{alertname=\"NetdriftStaleDNAT\"}: %+v", series)
	}
	t.Logf("NetdriftStaleDNAT firing %s after the agent reported the finding (for %s, scrape/eval %s): %s",
		took.Round(100*time.Millisecond), forDur, iv, describe(fired))
	if took > bound+time.Second { // +1 s: the poll
		t.Errorf("NetdriftStaleDNAT fired %s after the finding; want within for %s + 2 scrape intervals + 1 evaluation = %s", took, forDur, bound)
	}
	if took < forDur-iv {
		t.Errorf("NetdriftStaleDNAT fired %s after the finding, before its for (%s) elapsed", took, forDur)
	}
	if f := fired[0]; f.Labels["kind"] != "stale_backend" || f.Labels["severity"] != "critical" ||
		!strings.Contains(f.Annotations["description"], "New connections this node sent to stale backends") {
		t.Errorf("alert %+v: want kind stale_backend, severity critical, the connections line", f)
	}
	if err := l.ThawKubeProxy(frozen); err != nil {
		t.Fatal(err)
	}
	thawed = true
	gone := eventually(t, 60*time.Second, 500*time.Millisecond, "NetdriftStaleDNAT resolves", func() (bool, string) {
		as := alertsNow(t, p)
		return len(Named(as, "NetdriftStaleDNAT", "")) == 0, describe(as)
	})
	t.Logf("NetdriftStaleDNAT resolved %s after the thaw", gone.Round(100*time.Millisecond))
}

// testWatchAlert: the API server stopped. Every agent's NetdriftWatchUnhealthy
// and NetdriftWatchUnhealthyClusterWide fire; no NetdriftStaleDNAT is ever
// active meanwhile; all resolve once the API server is back.
func testWatchAlert(t *testing.T, e *env) {
	l := e.lab
	p := promOf(l)
	ctx := context.Background()
	if err := l.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = l.StartAPIServer(context.Background())
		}
	})
	var nodes []string
	for _, n := range l.Nodes() {
		nodes = append(nodes, n.Name)
	}
	iv := l.ScrapeInterval()
	bound := watchUnhealthyAfter + forOf(t, "NetdriftWatchUnhealthy") + 3*iv + 30*time.Second
	// Alerts of a stale datapath that became active during the outage (one already active
	// before it has another cause, and fails stalealert).
	var stale []PromAlert
	check := func(as []PromAlert) {
		for _, a := range append(Named(as, "NetdriftStaleDNAT", ""), Named(as, "NetdriftNodeLagging", "")...) {
			if a.ActiveAt.After(stopped) && len(stale) < 5 {
				stale = append(stale, a)
			}
		}
	}
	fired, _ := waitAlert(t, p, "NetdriftWatchUnhealthy", bound, func(as []PromAlert) (bool, string) {
		check(alertsNow(t, p))
		have := map[string]bool{}
		for _, a := range as {
			have[a.Labels["node"]] = true
		}
		for _, n := range nodes {
			if !have[n] {
				return false, "not yet for " + n + ": " + describe(as)
			}
		}
		return true, ""
	})
	t.Logf("NetdriftWatchUnhealthy firing for %d nodes %s after the API server stopped", len(fired), time.Since(stopped).Round(time.Second))
	cw, _ := waitAlert(t, p, "NetdriftWatchUnhealthyClusterWide", 30*time.Second, func([]PromAlert) (bool, string) { return true, "" })
	t.Logf("NetdriftWatchUnhealthyClusterWide: %s", cw[0].Annotations["summary"])
	check(alertsNow(t, p))
	if stale != nil {
		var why []string
		for _, a := range stale {
			var d Drift
			err := agent(t, l, a.Labels["node"]).Get(ctx, "/v1/drift", &d)
			why = append(why, fmt.Sprintf("%s %s since %s: findings %s %v", a.Labels["alertname"], a.Labels["node"], a.ActiveAt.Format(time.TimeOnly), kinds(d.Findings), err))
		}
		t.Errorf("alerts of a stale datapath while only the API server was down (API server stopped %s): %s", stopped.Format(time.TimeOnly), strings.Join(why, "; "))
	}
	if err := l.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	gone := eventually(t, 90*time.Second, time.Second, "watch alerts resolve", func() (bool, string) {
		as := alertsNow(t, p)
		return len(Named(as, "NetdriftWatchUnhealthy", ""))+len(Named(as, "NetdriftWatchUnhealthyClusterWide", "")) == 0, describe(as)
	})
	t.Logf("watch alerts resolved %s after the API server returned", gone.Round(time.Second))
}

// testPanels: every query of deploy/grafana-dashboard.json, run over the
// lab's life as Grafana would graph it ($node = all nodes), returns at
// least one series with a sample. Runs after the stories that feed the
// panels (rollout, ready refusals, frozen kube-proxy).
func testPanels(t *testing.T, e *env) { checkPanels(t, e, func(string) string { return "" }) }

// checkPanels runs every dashboard query over the lab's life, as testPanels
// says, except those skip gives a reason for (logged).
func checkPanels(t *testing.T, e *env, skip func(expr string) string) {
	l := e.lab
	p := promOf(l)
	qs, err := DashboardQueries(filepath.Join(labenv.ModuleDir(), "..", "deploy", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 20 {
		t.Fatalf("%d dashboard queries: the dashboard did not parse as expected", len(qs))
	}
	end := time.Now()
	start := end.Add(-time.Since(e.started))
	rate := "1m" // Grafana's $__rate_interval is at least four scrape intervals
	for _, q := range qs {
		if why := skip(q.Expr); why != "" {
			t.Logf("panel %-45q %s: not checked: %s", q.Panel, q.RefID, why)
			continue
		}
		expr := Substitute(q.Expr, rate)
		res, err := p.QueryRange(context.Background(), expr, start, end, 5*time.Second)
		n := 0
		for _, s := range res {
			n += len(s.Values)
		}
		if err != nil || n == 0 {
			t.Errorf("panel %q (%s) would be empty: %q returned %d series, %d samples (err %v)", q.Panel, q.RefID, expr, len(res), n, err)
			continue
		}
		t.Logf("panel %-45q %s: %d series", q.Panel, q.RefID, len(res))
	}
}

// testSlowAlerts (make test-lab-alerts): NetdriftReadyEndpointRefusals
// fires for a Ready endpoint that refuses (its `for` is 2m), and
// NetdriftAgentDown for a killed agent (5m).
func testSlowAlerts(t *testing.T, e *env) {
	if os.Getenv("NETDRIFT_LAB_SLOW_ALERTS") == "" {
		t.Skip("set NETDRIFT_LAB_SLOW_ALERTS=1 (make test-lab-alerts): these alerts wait 2 and 5 minutes")
	}
	l := e.lab
	p := promOf(l)
	iv := l.ScrapeInterval()
	waitAlert(t, p, "NetdriftReadyEndpointRefusals", forOf(t, "NetdriftReadyEndpointRefusals")+settleWait+3*iv+30*time.Second,
		func(as []PromAlert) (bool, string) {
			return as[0].Labels["service"] == "deaf" && strings.Contains(as[0].Annotations["description"], "readiness probe"), describe(as)
		})
	node := l.Nodes()[len(l.Nodes())-1].Name
	if err := l.StopAgent(node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = l.StartAgent(node) })
	killed := time.Now()
	fired, at := waitAlert(t, p, "NetdriftAgentDown", forOf(t, "NetdriftAgentDown")+3*iv+30*time.Second, func(as []PromAlert) (bool, string) {
		return len(as) == 1 && as[0].Labels["node"] == node, describe(as)
	})
	t.Logf("NetdriftAgentDown for %s firing %s after the kill: %s", node, at.Sub(killed).Round(time.Second), fired[0].Annotations["description"])
}

// promValue is the value of an instant query with one result (0 when empty).
func promValue(t *testing.T, p *Prom, expr string) float64 {
	t.Helper()
	res, err := p.Query(context.Background(), expr)
	if err != nil || len(res) > 1 {
		t.Fatalf("%s: %v (%d series)", expr, err, len(res))
	}
	if len(res) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(fmt.Sprint(res[0].Value[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
