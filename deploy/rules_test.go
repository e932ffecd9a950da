package deploy_test

import (
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestRulesPassPromtoolCheck(t *testing.T) {
	out := runPromtool(t, "check", "rules", rulesFile)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
}

// The promtool unit tests: every alert fires on the series that should fire it and stays
// quiet on the near misses (see the comments in tests/netdrift.rules.test.yml).
func TestRulesPassPromtoolUnitTests(t *testing.T) {
	files, err := filepath.Glob("tests/*.test.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule tests found: %v", err)
	}
	out := runPromtool(t, append([]string{"test", "rules"}, files...)...)
	if strings.Contains(out, "FAILED") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
}

// promtoolTests is the part of promtool's unit-test format this test inspects.
type promtoolTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name        string `json:"name"`
		InputSeries []struct {
			Series string `json:"series"`
		} `json:"input_series"`
		AlertRuleTests []struct {
			AlertName string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// Every alert has a case where it fires and a case where it must stay quiet, and no test
// feeds a misspelt metric (which would make a "stays quiet" case pass for nothing).
func TestEveryAlertIsTestedFiringAndQuiet(t *testing.T) {
	var pt promtoolTests
	if err := yaml.Unmarshal(readFile(t, "tests/netdrift.rules.test.yml"), &pt); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range pt.Tests {
		for _, s := range tc.InputSeries {
			if bad := unknownMetrics(s.Series); len(bad) > 0 {
				t.Errorf("test %q feeds unknown metrics %v", tc.Name, bad)
			}
		}
		for _, a := range tc.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	for _, a := range alerts(loadRules(t)) {
		if !fires[a.Alert] {
			t.Errorf("%s: no promtool test where it fires", a.Alert)
		}
		if !quiet[a.Alert] {
			t.Errorf("%s: no promtool test where it must stay quiet", a.Alert)
		}
	}
}

func TestAlertsAreComplete(t *testing.T) {
	runbook := string(readFile(t, runbookFile))
	as := alerts(loadRules(t))
	want := []string{"NetdriftStaleDNAT", "NetdriftNodeLagging", "NetdriftWatchUnhealthy",
		"NetdriftTerminatingRSTs", "NetdriftAgentDown", "NetdriftSourceDown"}
	have := map[string]bool{}
	for _, a := range as {
		have[a.Alert] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("alert %s missing", w)
		}
	}
	for _, a := range as {
		if sev := a.Labels["severity"]; sev != "critical" && sev != "warning" && sev != "info" {
			t.Errorf("%s: severity %q", a.Alert, sev)
		}
		for _, k := range []string{"summary", "description", "runbook_url"} {
			if a.Annotations[k] == "" {
				t.Errorf("%s: annotation %s missing", a.Alert, k)
			}
		}
		if got, want := a.Annotations["runbook_url"], runbookURL+strings.ToLower(a.Alert); got != want {
			t.Errorf("%s: runbook_url %q, want %q", a.Alert, got, want)
		}
		if !regexp.MustCompile(`(?m)^## ` + a.Alert + `\s*$`).MatchString(runbook) {
			t.Errorf("%s: no '## %s' section in %s", a.Alert, a.Alert, runbookFile)
		}
		for _, s := range append([]string{a.Expr}, a.Annotations["description"]) {
			if bad := unknownMetrics(s); len(bad) > 0 {
				t.Errorf("%s: unknown metrics %v", a.Alert, bad)
			}
		}
	}
	if !strings.Contains(as[indexOf(as, "NetdriftTerminatingRSTs")].Annotations["description"], "netdrift_recommended_prestop_seconds") {
		t.Error("NetdriftTerminatingRSTs does not give the preStop advice")
	}
}

func indexOf(as []rule, name string) int {
	for i, a := range as {
		if a.Alert == name {
			return i
		}
	}
	return 0
}

// The PrometheusRule carries exactly the plain file's groups (both are rendered from the
// mixin; mixin_test.go checks they are its output).
func TestPrometheusRuleMatchesPlainFile(t *testing.T) {
	got := readFile(t, prometheusRuleFile)
	var pr struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Spec       ruleFile `json:"spec"`
	}
	if err := yaml.Unmarshal(got, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("%s: %s %s", prometheusRuleFile, pr.APIVersion, pr.Kind)
	}
	if !reflect.DeepEqual(pr.Spec, loadRules(t)) {
		t.Errorf("%s groups differ from %s", prometheusRuleFile, rulesFile)
	}
}
