package deploy_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // rows
	GridPos *struct {
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"`
	Targets []struct {
		RefID  string `json:"refId"`
		Expr   string `json:"expr"`
		Format string `json:"format"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) (dashboard, []panel) {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(readFile(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var all []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return d, all
}

// grafanaVars are Grafana's built-in interval variables, replaced before PromQL parsing.
var grafanaVars = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

var varRE = regexp.MustCompile(`\$\{?(\w+)\}?`)

// substitute replaces Grafana variables with values PromQL accepts and reports the
// dashboard variables used.
func substitute(expr string, used map[string]bool) string {
	return varRE.ReplaceAllStringFunc(expr, func(m string) string {
		name := varRE.FindStringSubmatch(m)[1]
		if v, ok := grafanaVars[name]; ok {
			return v
		}
		used[name] = true
		return ".*" // every dashboard variable is a regex label matcher (=~"$node")
	})
}

// Every panel query parses: they are written into a rules file as recording rules and
// checked with promtool, which parses each expression with Prometheus' own parser.
func TestDashboardQueriesParse(t *testing.T) {
	d, all := loadDashboard(t)
	type rec struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rec
	used := map[string]bool{}
	for _, p := range all {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %d %q has no query", p.ID, p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %d %q target %s: empty expr", p.ID, p.Title, tg.RefID)
				continue
			}
			if bad := unknownMetrics(tg.Expr); len(bad) > 0 {
				t.Errorf("panel %q: unknown metrics %v", p.Title, bad)
			}
			rules = append(rules, rec{Record: fmt.Sprintf("dashboard:panel_%d_%s", p.ID, tg.RefID), Expr: substitute(tg.Expr, used)})
		}
	}
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
	}
	for v := range used {
		if !defined[v] {
			t.Errorf("queries use $%s, which the dashboard does not define", v)
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	res := runPromtool(t, "check", "rules", writeTemp(t, "dashboard.rules.yml", out))
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(rules)); !strings.Contains(res, want) {
		t.Fatalf("promtool: %s (want %q)", res, want)
	}
}

// The parser check above must reject a broken query, or it proves nothing.
func TestDashboardQueryCheckRejectsBrokenPromQL(t *testing.T) {
	promtool(t)
	out, _ := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "x", "rules": []any{
		map[string]string{"record": "x:broken", "expr": substitute(`sum by (node (rate(netdrift_findings[$__rate_interval]))`, map[string]bool{})},
	}}}})
	if err := promtoolErr(t, "check", "rules", writeTemp(t, "broken.yml", out)); err == nil {
		t.Fatal("promtool accepted a broken expression")
	}
}

// The panels the issue asks for, by what they query: each entry names strings one panel's
// queries (together) must contain, so "beside" means in the same panel.
func TestDashboardHasTheRequiredPanels(t *testing.T) {
	d, all := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("dashboard needs a uid and a title")
	}
	find := func(want string, typ string, subs ...string) {
		t.Helper()
		for _, p := range all {
			if typ != "" && p.Type != typ {
				continue
			}
			var exprs []string
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
			joined, ok := strings.Join(exprs, "\n"), true
			for _, s := range subs {
				ok = ok && strings.Contains(joined, s)
			}
			if ok {
				return
			}
		}
		t.Errorf("no panel for %s (queries containing %q)", want, subs)
	}
	find("network programming latency, netdrift beside kube-proxy", "timeseries",
		"netdrift_network_programming_latency_seconds_bucket", "kubeproxy_network_programming_duration_seconds_bucket", "by (node, le)", `job="kube-proxy"`)
	find("removal lag per node", "timeseries", "netdrift_node_programming_lag_seconds_bucket", `change="remove"`, "by (node, le)")
	find("programming lag heatmap", "heatmap", "netdrift_node_programming_lag_seconds_bucket")
	find("kube-proxy's own sync p99 and rate", "timeseries", "kubeproxy_sync_proxy_rules_duration_seconds_bucket", "kubeproxy_sync_proxy_rules_duration_seconds_count")
	find("pending changes per node", "timeseries", "netdrift_pending_changes", "by (node)")
	find("age of the oldest pending change per node", "timeseries", "netdrift_oldest_pending_change_seconds", "by (node)")
	find("stale backends by service", "timeseries", "netdrift_stale_backends", "by (node, namespace, service)")
	find("nodes with stale findings", "", "netdrift_findings", "stale_backend|stale_frontend", "by (node")
	find("RSTs of terminating pods by service", "timeseries", "netdrift_terminating_rsts_total", "by (namespace, service)")
	find("refusals by Ready endpoints by service", "timeseries", "netdrift_ready_endpoint_refusals_total", "by (namespace, service)")
	find("connections sent to stale backends", "timeseries", "netdrift_stale_backend_connections_total", "by (node, namespace, service)")
	find("watch health per node", "state-timeline", "netdrift_watch_healthy", "by (node)")
	find("recommended preStop (cluster max)", "stat", "max(netdrift_recommended_prestop_seconds)")
	find("agent CPU beside kube-proxy's", "timeseries", "process_cpu_seconds_total{job=\"netdrift\"", "process_cpu_seconds_total{job=\"kube-proxy\"")
	find("agent RSS beside kube-proxy's", "timeseries", "process_resident_memory_bytes{job=\"netdrift\"", "process_resident_memory_bytes{job=\"kube-proxy\"")
	// Per node: every query that is not a cluster-wide figure follows the node variable.
	for _, p := range all {
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, `node=~"$node"`) && tg.Expr != "max(netdrift_recommended_prestop_seconds)" {
				t.Errorf("panel %q: query %q ignores the node variable", p.Title, tg.Expr)
			}
		}
	}
	ids := map[int]bool{}
	for _, p := range all {
		if ids[p.ID] {
			t.Errorf("duplicate panel id %d", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %d %q has no size", p.ID, p.Title)
		}
		for _, tg := range p.Targets {
			if p.Type == "heatmap" && tg.Format != "heatmap" {
				t.Errorf("heatmap panel %q: target format %q, want heatmap", p.Title, tg.Format)
			}
		}
	}
}
