package cli

import (
	"bytes"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/agent/agenttest"
	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/rst"
	"github.com/netdrift/netdrift/internal/testutil/golden"
)

// maxColumns is the terminal width the tables must fit.
const maxColumns = 100

// fixedRSTs is the RST pipeline of these tests: its snapshot is what
// /v1/rsts and the per-service view serve.
type fixedRSTs struct {
	status rst.Status
	snap   rst.Snapshot
}

func (f fixedRSTs) Status() rst.Status     { return f.status }
func (f fixedRSTs) Snapshot() rst.Snapshot { return f.snap }

func newFixedRSTs() fixedRSTs {
	since := 1.25
	st := rst.Status{Up: true, Mode: rst.ModeTracepoint, Reason: "tracepoint tcp/tcp_send_reset has the >= 6.10 layout (fires for resets sent without a socket)"}
	return fixedRSTs{status: rst.Status{Up: true, Mode: rst.ModeTracepoint}, snap: rst.Snapshot{
		Status:  st,
		Watched: []netip.Addr{netip.MustParseAddr("10.244.1.13"), netip.MustParseAddr("10.244.2.12")},
		Totals:  map[model.ServiceName]uint64{{Namespace: "shop", Name: "web"}: 3, {Namespace: "shop", Name: "cart"}: 1},
		ByState: map[model.ServiceName]rst.StateCounts{{Namespace: "shop", Name: "web"}: {Ready: 701, Terminating: 2, Deleted: 1,
			ReadyRefusals: 700}, {Namespace: "shop", Name: "cart"}: {Terminating: 1}},
		Unsettled: 2,
		Samples: []rst.Record{
			{Time: agenttest.Now.Add(-9 * time.Second), Direction: "sent_by_watched", Reason: "NO_SOCKET",
				Watched: "10.244.1.13:8080", Client: "10.244.2.7:40312", Namespace: "shop", Pod: "web-7d9c8b6f5-x2k4p",
				Service: model.ServiceName{Namespace: "shop", Name: "web"}, SecondsSinceDeletion: &since},
			{Time: agenttest.Now.Add(-4 * time.Second), Direction: "sent_to_watched", Reason: "NOT_SPECIFIED",
				Watched: "10.244.2.12:8080", Client: "10.244.0.9:51000", Namespace: "shop", Pod: "cart-5f6d-q8w2z"},
		},
		Sampling: rst.Sampling{PerSecondPerCPU: 100, Max: 1000, RateLimited: 5},
	}}
}

// fixedAgent serves the real API handler over the fixed state.
func fixedAgent(t *testing.T) string {
	t.Helper()
	st := agenttest.State()
	pr := api.Providers{RSTs: newFixedRSTs()}
	srv := httptest.NewServer(api.NewHandler(func() agent.State { return st }, prometheus.NewRegistry(), pr))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestQueryCommandsGolden runs the responder commands against the real
// handler over a fixed state: output, exit status, and every table line
// within 100 columns.
func TestQueryCommandsGolden(t *testing.T) {
	url := fixedAgent(t)
	cases := []struct {
		golden string
		args   []string
		code   int
	}{
		{"status.txt.golden", []string{"status"}, ExitOK},
		{"status.json.golden", []string{"status", "-o", "json"}, ExitOK},
		{"drift.txt.golden", []string{"drift"}, ExitFindings},
		{"drift.json.golden", []string{"drift", "-o", "json"}, ExitFindings},
		{"explain-web.txt.golden", []string{"explain", "shop/web"}, ExitOK},
		{"explain-web.json.golden", []string{"explain", "shop/web", "-o", "json"}, ExitOK},
		{"explain-cart.txt.golden", []string{"explain", "shop/cart"}, ExitOK},
		{"explain-unknown.txt.golden", []string{"explain", "shop/nope"}, ExitError},
		{"lag.txt.golden", []string{"lag"}, ExitOK},
		{"lag.json.golden", []string{"lag", "-o", "json"}, ExitOK},
		{"rsts.txt.golden", []string{"rsts"}, ExitOK},
		{"rsts.json.golden", []string{"rsts", "-o", "json"}, ExitOK},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append(c.args, "--agent", url)
			code := run(Env{}, args, &out, &errb)
			if code != c.code {
				t.Errorf("netdrift %s: exit %d, want %d (stderr %q)", strings.Join(c.args, " "), code, c.code, errb.String())
			}
			if errb.Len() > 0 {
				t.Errorf("stderr: %q", errb.String())
			}
			if out.Len() == 0 {
				t.Fatal("no output")
			}
			if strings.HasSuffix(c.golden, ".txt.golden") {
				for i, line := range strings.Split(out.String(), "\n") {
					if n := len([]rune(line)); n > maxColumns {
						t.Errorf("line %d is %d columns wide (max %d): %q", i+1, n, maxColumns, line)
					}
				}
			}
			golden.Check(t, filepath.Join("testdata", c.golden), out.Bytes())
		})
	}
}

// TestQueryCommandErrors: bad arguments and an unreachable agent are exit 2
// with a message naming the problem.
func TestQueryCommandErrors(t *testing.T) {
	url := fixedAgent(t)
	dead := httptest.NewServer(nil)
	deadURL := dead.URL
	dead.Close()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"status", "--agent", deadURL}, "agent at " + deadURL},
		{[]string{"drift", "-o", "xml", "--agent", url}, `-o must be table, wide, json or yaml, not "xml"`},
		{[]string{"explain", "web", "--agent", url}, "want NAMESPACE/NAME"},
		{[]string{"explain", "--agent", url}, "expected 1 argument"},
		{[]string{"lag", "extra", "--agent", url}, "expected 0 argument"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		if code := run(Env{}, c.args, &out, &errb); code != ExitError {
			t.Errorf("netdrift %s: exit %d, want %d", strings.Join(c.args, " "), code, ExitError)
		}
		if !strings.Contains(errb.String(), c.want) {
			t.Errorf("netdrift %s: stderr %q, want it to mention %q", strings.Join(c.args, " "), errb.String(), c.want)
		}
	}
}

// TestQueryTablesFitLongNames: with the longest names Kubernetes allows
// (63-character namespaces and services), long details and reasons, every
// table line still fits in 100 columns.
func TestQueryTablesFitLongNames(t *testing.T) {
	long := model.ServiceName{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("s", 63)}
	st := agenttest.State()
	for i := range st.Stale {
		st.Stale[i].Service.ServiceName = long
		st.Stale[i].Service.Port = strings.Repeat("p", 15)
		st.Stale[i].Detail = strings.Repeat("a very long detail ", 20)
	}
	for i := range st.Recent {
		st.Recent[i].Service = long
	}
	st.Notes = append(st.Notes, strings.Repeat("a long note ", 20))
	st.Sources[1].Error = strings.Repeat("a long error ", 20)
	st.DatapathReason = strings.Repeat("a long reason ", 10)
	rep := newFixedRSTs()
	rep.snap.Totals[long] = 7
	rep.snap.Samples[0].Namespace, rep.snap.Samples[0].Pod, rep.snap.Samples[0].Service = strings.Repeat("n", 63), strings.Repeat("p", 63), long
	rep.status = rst.Status{Reason: strings.Repeat("kernel lacks the tracepoint ", 5)}
	srv := httptest.NewServer(api.NewHandler(func() agent.State { return st }, prometheus.NewRegistry(), api.Providers{RSTs: rep}))
	defer srv.Close()
	svc := st.Stale[0].Service.Service()
	for _, args := range [][]string{{"status"}, {"drift"}, {"explain", svc}, {"lag"}, {"rsts"}} {
		var out, errb bytes.Buffer
		run(Env{}, append(args, "--agent", srv.URL), &out, &errb)
		if out.Len() == 0 {
			t.Errorf("netdrift %s: no output (stderr %q)", args[0], errb.String())
		}
		for i, line := range strings.Split(out.String(), "\n") {
			if args[0] == "explain" && i == 0 {
				continue // "service NS/NAME ...": a title, not a table; a name may be 127 characters
			}
			if n := len([]rune(line)); n > maxColumns {
				t.Errorf("netdrift %s: line %d is %d columns wide (max %d): %q", args[0], i+1, n, maxColumns, line)
			}
		}
	}
}
