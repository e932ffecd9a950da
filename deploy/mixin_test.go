package deploy_test

// The monitoring mixin (mixin/, jsonnet) is the one source of the alerts and the dashboard:
// tools/mixingen renders it into the plain rules file, the PrometheusRule, the chart's copies
// and grafana-dashboard.json, and this test fails when a checked-in file is not its output.

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/testutil/doccmd"
)

// mixingen runs tools/mixingen, writing into out.
func mixingen(t *testing.T, out string) {
	t.Helper()
	abs, err := filepath.Abs(out)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./mixingen", "-mixin", "../mixin", "-out", abs)
	cmd.Dir = "tools"
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./mixingen: %v\n%s", err, b)
	}
}

func TestMixinOutputIsCheckedIn(t *testing.T) {
	if *update {
		mixingen(t, ".")
	}
	tmp := t.TempDir()
	mixingen(t, tmp)
	var n int
	err := filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(tmp, p)
		n++
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(rel)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not the mixin's output (edit deploy/mixin, then run make mixin): %v", rel, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("mixingen wrote %d files, want 5 (rules, PrometheusRule, dashboard, the chart's rules and dashboard)", n)
	}
}

// A broken mixin is an error, not an empty file.
func TestMixingenRejectsABrokenMixin(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mixin.libsonnet"), []byte("{ prometheusAlerts: { groups: [ { name: 'x', rules: [ { alert: 'A', expr: 'up', annotations: { sumary: 'typo' } } ] } ] }, prometheusRules: { groups: [] }, grafanaDashboards: { 'netdrift.json': {} } }"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("go", "run", "./mixingen", "-mixin", dir, "-out", out)
	cmd.Dir = "tools"
	b, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("mixingen accepted a mixin with a misspelt annotation:\n%s", b)
	}
	if !strings.Contains(string(b), "sumary") {
		t.Errorf("the error does not name the bad field: %s", b)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("mixingen wrote %d entries for a broken mixin", len(entries))
	}
}

// Every alert's runbook_url points at a section of docs/runbook.md that exists.
func TestRunbookURLsResolve(t *testing.T) {
	have := doccmd.Anchors(string(readFile(t, runbookFile)))
	for _, a := range alerts(loadRules(t)) {
		u := a.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(u, runbookURL)
		if !ok {
			t.Errorf("%s: runbook_url %q is not in docs/runbook.md", a.Alert, u)
			continue
		}
		if !have[anchor] {
			t.Errorf("%s: runbook_url anchor #%s is no heading of %s", a.Alert, anchor, runbookFile)
		}
	}
}

var mdLinkRE = regexp.MustCompile(`\]\(([a-z0-9_./-]*\.md)?#([^)]+)\)`)

// The runbook's own links to sections (of itself or another doc) resolve.
func TestRunbookLinksResolve(t *testing.T) {
	rb := string(readFile(t, runbookFile))
	for _, m := range mdLinkRE.FindAllStringSubmatch(rb, -1) {
		target := runbookFile
		if m[1] != "" {
			target = filepath.Join(filepath.Dir(runbookFile), m[1])
		}
		b, err := os.ReadFile(target)
		if err != nil {
			t.Errorf("link %s: %v", m[0], err)
			continue
		}
		if !doccmd.Anchors(string(b))[m[2]] {
			t.Errorf("link %s: %s has no heading with anchor #%s", m[0], target, m[2])
		}
	}
}

// The checker above must find a missing anchor, or it proves nothing.
func TestAnchorsOfHeadings(t *testing.T) {
	a := doccmd.Anchors("# Title\n## NetdriftStaleDNAT\n### Access to the secure endpoint\n## What `status` says (v1)\n")
	for _, want := range []string{"title", "netdriftstalednat", "access-to-the-secure-endpoint", "what-status-says-v1"} {
		if !a[want] {
			t.Errorf("anchor %q missing from %v", want, a)
		}
	}
	if a["netdriftstale"] {
		t.Error("a prefix counted as an anchor")
	}
}
