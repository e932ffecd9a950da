package scenarios

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/lab/labenv"
)

func TestSubstitute(t *testing.T) {
	got := Substitute(`sum by (node) (rate(x{node=~"$node"}[$__rate_interval])) + y{a="${node}"}[$__interval]`, "1m")
	want := `sum by (node) (rate(x{node=~".*"}[1m])) + y{a=".*"}[1m]`
	if got != want {
		t.Errorf("Substitute: %s\nwant %s", got, want)
	}
	if got := Substitute(`x{job="$job"}`, "1m"); got != `x{job="$job"}` {
		t.Errorf("an unknown variable was replaced: %s", got)
	}
}

// The panel check reads every query of the dashboard deploy/ ships, rows included.
func TestSubstituteDashboardQueries(t *testing.T) {
	qs, err := DashboardQueries(filepath.Join(labenv.ModuleDir(), "..", "deploy", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 20 {
		t.Fatalf("%d queries", len(qs))
	}
	for _, q := range qs {
		if q.Panel == "" || q.RefID == "" || q.Expr == "" {
			t.Errorf("incomplete query %+v", q)
		}
		if s := Substitute(q.Expr, "1m"); strings.Contains(s, "$") {
			t.Errorf("panel %q: a variable is left: %s", q.Panel, s)
		}
	}
}
