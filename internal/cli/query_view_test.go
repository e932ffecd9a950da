package cli

import (
	"bytes"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/agent/agenttest"
	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/testutil/golden"
)

// TestQueryCommandsBlind: against an agent that cannot reach the API
// server, drift, explain, lag and rsts answer "no view: ..." with the reason,
// since when and the last error, and exit 3, in table and JSON output
// (the line then on stderr); status shows the view and exits 0.
func TestQueryCommandsBlind(t *testing.T) {
	st := agenttest.Blind()
	srv := httptest.NewServer(api.NewHandler(func() agent.State { return st }, prometheus.NewRegistry(),
		api.Providers{RSTs: newFixedRSTs()}))
	defer srv.Close()
	want := "no view: " + st.View.Reason + "; since 2026-11-29T14:28:55Z; last error: " + agenttest.APIError + "\n"
	for _, c := range []struct {
		golden string
		args   []string
		code   int
	}{
		{"drift-blind.txt.golden", []string{"drift"}, ExitNoView},
		{"", []string{"drift", "-o", "json"}, ExitNoView},
		{"explain-blind.txt.golden", []string{"explain", "shop/web"}, ExitNoView},
		{"", []string{"explain", "shop/web", "-o", "json"}, ExitNoView},
		{"", []string{"lag"}, ExitNoView},
		{"", []string{"lag", "-o", "json"}, ExitNoView},
		{"", []string{"rsts"}, ExitNoView},
		{"", []string{"rsts", "-o", "json"}, ExitNoView},
		{"status-blind.txt.golden", []string{"status"}, ExitOK},
	} {
		var out, errb bytes.Buffer
		code := run(Env{}, append(c.args, "--agent", srv.URL), &out, &errb)
		name := strings.Join(c.args, " ")
		if code != c.code {
			t.Errorf("netdrift %s: exit %d, want %d (stderr %q)", name, code, c.code, errb.String())
		}
		json := strings.Contains(name, "json")
		switch {
		case c.args[0] == "status":
			if !strings.Contains(out.String(), "NOT CURRENT (api_failing)") || !strings.Contains(out.String(), agenttest.APIError) {
				t.Errorf("netdrift status: the blind view is not shown:\n%s", out.String())
			}
		case json && (errb.String() != want || !strings.Contains(out.String(), `"current": false`)):
			t.Errorf("netdrift %s: stderr %q, stdout %q; want the no view line on stderr and the view in the JSON", name, errb.String(), out.String())
		case !json && !strings.HasPrefix(out.String(), want):
			t.Errorf("netdrift %s: output does not start with %q:\n%s", name, want, out.String())
		}
		if c.golden != "" {
			golden.Check(t, filepath.Join("testdata", c.golden), out.Bytes())
		}
	}
}
