package api_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsMatchGolden: every example response in docs/api.md is the
// current golden file, verbatim, so the documentation cannot drift from
// what the handlers serve.
func TestDocsMatchGolden(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{
		"testdata/healthz.golden", "testdata/readyz.golden", "testdata/readyz-starting.golden",
		"testdata/status.json.golden", "testdata/status-starting.json.golden", "testdata/drift.json.golden",
		"testdata/drift-blind.json.golden", "../cli/testdata/drift-blind.txt.golden",
		"testdata/service-web.json.golden", "testdata/service-unknown.json.golden", "testdata/lag.json.golden",
		"testdata/post-refused.golden",
		"../cli/testdata/rsts.json.golden", "../cli/testdata/status.txt.golden",
		"../cli/testdata/drift.txt.golden", "../cli/testdata/explain-web.txt.golden",
		"../cli/testdata/lag.txt.golden", "../cli/testdata/rsts.txt.golden",
	} {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "\n"+string(want)+"```") {
			t.Errorf("docs/api.md does not show %s verbatim (update the example)", f)
		}
	}
	metrics, err := os.ReadFile("testdata/metrics.golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(metrics), "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			name := strings.Fields(line)[2]
			if !strings.Contains(string(doc), "| `"+name+"` |") {
				t.Errorf("docs/api.md does not document metric %s", name)
			}
		}
		if strings.HasPrefix(line, "netdrift_") && !strings.Contains(line, "_bucket") && !strings.Contains(string(doc), "\n"+line+"\n") {
			t.Errorf("docs/api.md example lacks %q", line)
		}
	}
}
