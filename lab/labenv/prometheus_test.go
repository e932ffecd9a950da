package labenv

import (
	"strings"
	"testing"
	"time"
)

// The lab Prometheus scrapes each node's agent and kube-proxy with the node label
// deploy/'s rules and dashboard expect, and loads the rule files as given.
func TestPrometheusConfig(t *testing.T) {
	o := Options{Name: "t", Nodes: 2, Agent: "/bin/true", Prometheus: true, ScrapeInterval: 3 * time.Second,
		RuleFiles: []string{"/x/netdrift.rules.yml"}}
	l := &Lab{opts: o}
	got := l.prometheusConfig()
	for _, want := range []string{
		"scrape_interval: 3s", "evaluation_interval: 3s", `- "/x/netdrift.rules.yml"`,
		"job_name: netdrift", `targets: ["10.99.0.11:9760"]`, `labels: {node: "node-1"}`, `targets: ["10.99.0.12:9760"]`,
		"job_name: kube-proxy", `targets: ["10.99.0.12:10249"]`, `labels: {node: "node-2"}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	l.opts.Agent = ""
	if strings.Contains(l.prometheusConfig(), "job_name: netdrift") {
		t.Error("a netdrift job without agents")
	}
}

func TestPrometheusOptions(t *testing.T) {
	o := Options{Prometheus: true, PrometheusBin: "/nonexistent/prometheus"}
	if err := o.prometheusDefaults(); err == nil || !strings.Contains(err.Error(), "make deps") {
		t.Errorf("missing binary: %v", err)
	}
	o = Options{Prometheus: true, PrometheusBin: "/bin/true", ScrapeInterval: 1500 * time.Millisecond}
	if err := o.prometheusDefaults(); err == nil {
		t.Error("a scrape interval of 1.5s was accepted")
	}
	o = Options{Prometheus: true, PrometheusBin: "/bin/true", RuleFiles: []string{"/nonexistent.yml"}}
	if err := o.prometheusDefaults(); err == nil {
		t.Error("a missing rules file was accepted")
	}
}
