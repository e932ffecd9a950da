package deploy_test

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the generated files (mixin output, plain manifests, seccomp profile) instead of comparing")

const (
	rulesFile          = "prometheus/netdrift.rules.yml"
	prometheusRuleFile = "prometheus-rules.yaml"
	dashboardFile      = "grafana-dashboard.json"
	manifestFile       = "daemonset.yaml"
	runbookFile        = "../docs/runbook.md"
	runbookURL         = "https://github.com/netdrift/netdrift/blob/main/docs/runbook.md#"
)

// knownMetrics are the agent's metric names (issues "Live agent", "eBPF RST probe",
// "Node-level staleness"); value: whether it is a histogram.
var knownMetrics = map[string]bool{
	"netdrift_build_info":                          false,
	"netdrift_node_info":                           false,
	"netdrift_source_up":                           false,
	"netdrift_source_scrape_duration_seconds":      false,
	"netdrift_findings":                            false,
	"netdrift_oldest_finding_age_seconds":          false,
	"netdrift_pending_changes":                     false,
	"netdrift_oldest_pending_change_seconds":       false,
	"netdrift_node_programming_lag_seconds":        true,
	"netdrift_network_programming_latency_seconds": true,
	"netdrift_watch_delay_seconds":                 true,
	"netdrift_watch_healthy":                       false,
	"netdrift_view_current":                        false,
	"netdrift_view_not_current_reason":             false,
	"netdrift_view_blind_seconds":                  false,
	"netdrift_reader_fallback_active":              false,
	"netdrift_reader_warnings":                     false,
	"netdrift_stale_backends":                      false,
	"netdrift_terminating_rsts_total":              false,
	"netdrift_endpoint_rsts_total":                 false,
	"netdrift_ready_endpoint_refusals_total":       false,
	"netdrift_rst_unsettled":                       false,
	"netdrift_rst_probe_up":                        false,
	"netdrift_recommended_prestop_seconds":         false,
	"netdrift_stale_conntrack_entries":             false,
	"netdrift_stale_backend_connections_total":     false,
	"netdrift_full_audit_corrections_total":        false,
	"netdrift_reader_audit_differences_total":      false,
	"netdrift_reader_audits_deferred_total":        false,
	"netdrift_change_events_lost_total":            false,
	"netdrift_trigger_time_skew_total":             false,
	"netdrift_lag_samples_dropped_total":           false,
}

var metricRE = regexp.MustCompile(`\bnetdrift_[a-z0-9_]+`)

// unknownMetrics returns the netdrift_* names in s that the agent does not export.
func unknownMetrics(s string) []string {
	var bad []string
	for _, m := range metricRE.FindAllString(s, -1) {
		if _, ok := knownMetrics[m]; ok {
			continue
		}
		base := m
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suf)
		}
		if knownMetrics[base] && base != m {
			continue
		}
		bad = append(bad, m)
	}
	return bad
}

// promtool returns the path of promtool or fails: CI installs it (Debian package prometheus).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install the Debian package prometheus (make deps)")
	}
	return p
}

func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ruleFile is the plain Prometheus rules format.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	if err := yaml.UnmarshalStrict(readFile(t, rulesFile), &rf); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return rf
}

func alerts(rf ruleFile) []rule {
	var out []rule
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func promtoolErr(t *testing.T, args ...string) error {
	t.Helper()
	return exec.Command(promtool(t), args...).Run()
}
