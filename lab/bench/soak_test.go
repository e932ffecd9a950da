package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// TestSoak is `make soak`: per mode a one-node lab at SOAK_SCALE endpoints
// (default 100k), one churn window of SOAK_SECONDS (default 1800) at
// SOAK_RATE changes per second (default 20), sampling RSS, goroutines and
// findings every SOAK_EVERY seconds (default 30). It reports the slopes
// and fails on what must hold however long the run: no stale finding
// (kube-proxy is healthy throughout), every change sampled or counted.
// Skipped unless NETDRIFT_SOAK=1.
func TestSoak(t *testing.T) {
	if os.Getenv("NETDRIFT_SOAK") != "1" {
		t.Skip("set NETDRIFT_SOAK=1 (make soak)")
	}
	needRoot(t)
	bin := agentBinary(t)
	ensureBins(t)
	eps, err := ParseScale(fields(t, "SOAK_SCALE", "100k")[0])
	if err != nil {
		t.Fatal(err)
	}
	rate, err := strconv.ParseFloat(fields(t, "SOAK_RATE", "20")[0], 64)
	if err != nil || rate <= 0 {
		t.Fatalf("SOAK_RATE: want changes per second, got %q", os.Getenv("SOAK_RATE"))
	}
	window := seconds(t, "SOAK_SECONDS", 1800)
	every := seconds(t, "SOAK_EVERY", 30)
	out := os.Getenv("BENCH_LIVE_OUT")
	if out == "" {
		out = filepath.Join(labenv.ModuleDir(), "..", "bin", "bench-live")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range fields(t, "SOAK_MODES", "nftables iptables-nft") {
		t.Run(mode, func(t *testing.T) {
			res := Run(context.Background(), Config{
				Mode: mode, Endpoints: eps, Rates: []float64{rate}, Window: window, Idle: 10 * time.Second,
				Agent: bin, AgentArgs: strings.Fields(os.Getenv("SOAK_AGENT_ARGS")), Logf: t.Logf, SoakEvery: every,
				LabName: "so" + Modes[mode].Short,
			})
			var buf bytes.Buffer
			res.Write(&buf)
			fmt.Fprintf(&buf, "\ncommand: make soak SOAK_MODES=%s SOAK_SCALE=%s SOAK_RATE=%g SOAK_SECONDS=%.0f", mode, ScaleName(eps), rate, window.Seconds())
			if a := os.Getenv("SOAK_AGENT_ARGS"); a != "" {
				fmt.Fprintf(&buf, " SOAK_AGENT_ARGS=%q", a)
			}
			fmt.Fprintln(&buf)
			fmt.Print(buf.String())
			file := filepath.Join(out, fmt.Sprintf("soak-%s-%s.txt", mode, ScaleName(eps)))
			if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
				t.Error(err)
			}
			if res.Err != nil {
				t.Fatalf("%v (partial results in %s)", res.Err, file)
			}
			checkSoak(t, res, window, every)
		})
	}
}

func checkSoak(t *testing.T, res *Result, window, every time.Duration) {
	s := Summarize(res.Soak)
	if want := int(window/every) / 2; s.Points < want {
		t.Errorf("%d samples, want at least %d over %s", s.Points, want, window)
	}
	// Stale findings are true while kube-proxy is late (Window.ProxyLate);
	// what must not happen is a finding the kernel contradicts, or one
	// that cannot be checked.
	if c := s.Checked; c.False > 0 || c.Unchecked > 0 || len(s.CheckErrors) > 0 {
		t.Errorf("stale findings: %d false (e.g. %v), %d of kinds not checked, %d checks failed (%v); %d confirmed",
			c.False, c.Examples, c.Unchecked, len(s.CheckErrors), s.CheckErrors, c.Confirmed)
	}
	if s.StaleSamples > 0 && s.Checked.Confirmed+s.Checked.Fixed == 0 && s.Checked.False == 0 {
		t.Errorf("%d samples had stale findings, none was checked", s.StaleSamples)
	}
	for _, w := range res.Churn {
		if m := w.Missing(); m != 0 {
			t.Errorf("%s: %d of %d changes have neither a sample nor a counted reason", w.Name, m, w.Changes)
		}
	}
}

// TestSlope checks the least-squares slope on exact lines and its guards.
func TestSlope(t *testing.T) {
	var pts []SoakPoint
	for i := 0; i < 7; i++ {
		pts = append(pts, SoakPoint{At: time.Duration(i) * 10 * time.Minute, AgentRSS: int64(80+3*i) << 20, Goroutines: 40})
	}
	// 3 MiB per 10 minutes = 18 MiB per hour; goroutines flat.
	if got := Slope(pts, agentMiB); math.Abs(got-18) > 1e-9 {
		t.Errorf("agent slope %v, want 18 MiB/h", got)
	}
	if got := Slope(pts, goroutines); got != 0 {
		t.Errorf("goroutine slope %v, want 0", got)
	}
	pts[3].Err, pts[3].AgentRSS = true, 1<<40 // a failed sample is left out
	if got := Slope(pts, agentMiB); math.Abs(got-18) > 1e-9 {
		t.Errorf("slope with a failed sample %v, want 18", got)
	}
	if got := Slope(pts[:1], agentMiB); got != 0 {
		t.Errorf("one point: slope %v, want 0", got)
	}
	s := Summarize(append(pts, SoakPoint{At: time.Hour, AgentRSS: 98 << 20, Stale: 2}))
	if s.MaxStale != 2 || s.StaleSamples != 1 || s.Failed != 1 || s.AgentPeak != 98 {
		t.Errorf("summary %+v", s)
	}
}

// TestWriteSoakCounters: the report names the first samples with stale
// findings (up to three of each) and the agent's counters at the last good
// sample, skipping a failed one.
func TestWriteSoakCounters(t *testing.T) {
	pts := []SoakPoint{
		{At: time.Minute, HeapAlloc: 100 << 20},
		{At: 2 * time.Minute, Stale: 4, FirstStale: []string{"stale_backend default/a 10.96.0.1:80/TCP 10.244.1.2:8080"}, HeapAlloc: 110 << 20},
		{At: 3 * time.Minute, EventsLost: 2, FullAudits: 7, Corrections: 5, Dropped: 6, ReaderAudits: 30, ReaderDiffs: 1, ReaderDeferred: 3, Fallbacks: 1, HeapAlloc: 120 << 20},
		{At: 4 * time.Minute, Err: true, EventsLost: 99},
	}
	var b strings.Builder
	writeSoakCounters(&b, pts)
	for _, want := range []string{
		"at 2m0s: 4 stale, e.g. stale_backend default/a 10.96.0.1:80/TCP 10.244.1.2:8080",
		"change events lost 2, full audits 7 (services corrected 5, changes dropped without a sample 6), reader self-audits 30 (differed 1, put off by commits 3), reader fallbacks in force 1",
		"agent heap_alloc (live + not yet collected) first 100 MiB, last 120 MiB, slope +600.0 MiB/h", // 10 MiB a minute
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report %q lacks %q", b.String(), want)
		}
	}
}

// TestSoakChecksSummed: the checks of every sample with findings add up in
// the summary, which prints them with the false ones and failed checks.
func TestSoakChecksSummed(t *testing.T) {
	pts := []SoakPoint{
		{At: time.Minute, Stale: 13, Check: &StaleCheck{Confirmed: 2, Fixed: 1, Commits: 2, Skipped: 10}},
		{At: 2 * time.Minute, NoView: "datapath_behind", BehindCommits: 7},
		{At: 3 * time.Minute, Stale: 2, Check: &StaleCheck{Confirmed: 1, False: 1, Commits: 0, Examples: []string{"stale_backend bench/s00001 10.96.0.1:80 10.128.0.9:8080"}}},
		{At: 4 * time.Minute, Stale: 1, Check: &StaleCheck{Err: "nft: exit status 1", Commits: -1}},
	}
	s := Summarize(pts)
	if c := s.Checked; c.Confirmed != 3 || c.False != 1 || c.Fixed != 1 || c.Skipped != 10 || len(c.Examples) != 1 || len(s.CheckErrors) != 1 || s.StaleSamples != 3 ||
		s.CheckedSamples != 3 || s.NoView["datapath_behind"] != 1 || s.MaxBehind != 7 {
		t.Fatalf("summary %+v", s)
	}
	var b strings.Builder
	writeSoak(&b, pts)
	for _, want := range []string{
		"checked against the kernel in 3 samples (read right after the sample, at most every 1m30s): 3 confirmed, 1 false, 1 fixed by a commit in between, 0 of kinds not checked, 10 past the 8 per sample the iptables check reads",
		"answers on no current view 1 (datapath_behind 1); most commits an answer's view trailed the kernel by: 7",
		"false: stale_backend bench/s00001 10.96.0.1:80 10.128.0.9:8080",
		"check failed: nft: exit status 1",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report %q lacks %q", b.String(), want)
		}
	}
}

// TestSoakLiveSecondHalf: a live heap that climbs, then levels, has a
// rising slope over the run and a flat second half; a leak stays rising;
// an agent that does not export it is said so.
func TestSoakLiveSecondHalf(t *testing.T) {
	series := func(f func(i int) float64) []SoakPoint {
		var ps []SoakPoint
		for i := range 20 {
			ps = append(ps, SoakPoint{At: time.Duration(i) * 30 * time.Second, AgentRSS: int64(f(i)) << 20, LiveHeap: f(i) * (1 << 20)})
		}
		return ps
	}
	var levels, leaks bytes.Buffer
	writeSoakLive(&levels, series(func(i int) float64 { return 100 + 10*float64(min(i, 8)) }))
	writeSoakLive(&leaks, series(func(i int) float64 { return 100 + 10*float64(i) }))
	if !strings.Contains(levels.String(), "live heap slope +0.0 MiB/h") || !strings.Contains(levels.String(), "first 100 MiB, last 180 MiB") {
		t.Errorf("a heap that levels off:\n%s", levels.String())
	}
	if !strings.Contains(leaks.String(), "live heap slope +1200.0 MiB/h") {
		t.Errorf("a leak:\n%s", leaks.String())
	}
	var none bytes.Buffer
	writeSoakLive(&none, []SoakPoint{{AgentRSS: 1 << 30}})
	if !strings.Contains(none.String(), "not exported") {
		t.Errorf("no live heap:\n%s", none.String())
	}
}
