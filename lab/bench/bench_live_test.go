package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// TestBenchLive is `make bench-live`: every mode x scale of the
// environment, each in its own one-node lab, tables printed and written to
// $BENCH_LIVE_OUT/<mode>-<scale>.txt. It measures, it asserts nothing but
// that the runs completed. Skipped unless NETDRIFT_BENCH_LIVE=1.
//
//	BENCH_LIVE_MODES    nftables iptables-nft iptables-legacy (or cilium: needs `make lab-cilium-bins`)
//	BENCH_LIVE_SCALES   10k 100k (total endpoints; 10 per service)
//	BENCH_LIVE_RATES    1 20 (changes per second, one window each)
//	BENCH_LIVE_SECONDS  60 (each churn window)
//	BENCH_LIVE_IDLE_SECONDS 30
//	BENCH_LIVE_SYNC_TIMEOUT 30m (kube-proxy's first sync; the agent's start-up)
//	BENCH_LIVE_AGENT_ARGS   extra agent flags
//	BENCH_LIVE_AGENT_ENV    the agent's extra environment (KEY=VALUE ...)
//	BENCH_LIVE_PROXY_START  running | stopped: kube-proxy while the objects are created (default: running for iptables-nft)
//	BENCH_LIVE_OUT      output directory (default ../../bin/bench-live)
//	NETDRIFT_LAB_PREFIX the labs' name prefix (default "bl": bl<mode>)
func TestBenchLive(t *testing.T) {
	if os.Getenv("NETDRIFT_BENCH_LIVE") != "1" {
		t.Skip("set NETDRIFT_BENCH_LIVE=1 (make bench-live)")
	}
	needRoot(t)
	bin := agentBinary(t)
	modes := fields(t, "BENCH_LIVE_MODES", "nftables iptables-nft iptables-legacy")
	scales := fields(t, "BENCH_LIVE_SCALES", "10k 100k")
	var rates []float64
	for _, r := range fields(t, "BENCH_LIVE_RATES", "1 20") {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v <= 0 {
			t.Fatalf("BENCH_LIVE_RATES: %q", r)
		}
		rates = append(rates, v)
	}
	window := seconds(t, "BENCH_LIVE_SECONDS", 60)
	idle := seconds(t, "BENCH_LIVE_IDLE_SECONDS", 30)
	syncTimeout := 30 * time.Minute
	if v := os.Getenv("BENCH_LIVE_SYNC_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("BENCH_LIVE_SYNC_TIMEOUT: %v", err)
		}
		syncTimeout = d
	}
	out := os.Getenv("BENCH_LIVE_OUT")
	if out == "" {
		out = filepath.Join(labenv.ModuleDir(), "..", "bin", "bench-live")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	ensureBins(t)
	offlineRuns := 5
	if v := os.Getenv("BENCH_LIVE_OFFLINE_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if offlineRuns = n; err != nil || n < 0 {
			t.Fatalf("BENCH_LIVE_OFFLINE_RUNS=%q: want a count of runs (0: none)", v)
		}
	}
	for _, mode := range modes {
		for _, sc := range scales {
			eps, err := ParseScale(sc)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(mode+"/"+ScaleName(eps), func(t *testing.T) {
				res := Run(context.Background(), Config{
					Mode: mode, Endpoints: eps, Rates: rates, Window: window, Idle: idle, SyncTimeout: syncTimeout,
					Agent: bin, AgentArgs: strings.Fields(os.Getenv("BENCH_LIVE_AGENT_ARGS")), Logf: t.Logf,
					AgentEnv:   strings.Fields(os.Getenv("BENCH_LIVE_AGENT_ENV")),
					ProxyStart: os.Getenv("BENCH_LIVE_PROXY_START"), OfflineRuns: offlineRuns,
					OfflineKeep: os.Getenv("BENCH_LIVE_OFFLINE_KEEP"), LabName: labPrefix() + Modes[mode].Short,
				})
				var buf bytes.Buffer
				res.Write(&buf)
				fmt.Fprintf(&buf, "\ncommand: make bench-live BENCH_LIVE_MODES=%s BENCH_LIVE_SCALES=%s BENCH_LIVE_RATES=%q BENCH_LIVE_SECONDS=%.0f BENCH_LIVE_IDLE_SECONDS=%.0f\n",
					mode, ScaleName(eps), os.Getenv("BENCH_LIVE_RATES"), window.Seconds(), idle.Seconds())
				fmt.Print(buf.String())
				file := filepath.Join(out, fmt.Sprintf("%s-%s.txt", mode, ScaleName(eps)))
				if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
					t.Error(err)
				}
				if res.Err != nil {
					t.Errorf("%s %s: %v (partial results in %s)", mode, ScaleName(eps), res.Err, file)
				}
			})
		}
	}
}

// TestBenchLiveQuick is the CI variant (make test-bench-live-quick): 1,000
// endpoints, one 30 s churn window at 5 changes/s per mode (nftables,
// iptables-nft and cilium; BENCH_LIVE_QUICK_MODES to choose). It asserts
// only correctness: every change yields a lag sample or a counted reason
// (the agent's superseded count), nothing stays pending, both processes'
// CPU was measured and the watch-only reference ran. Never a time or a
// ratio. Labs are named <NETDRIFT_LAB_PREFIX, default "bl">q<mode>.
func TestBenchLiveQuick(t *testing.T) {
	needRoot(t)
	bin := agentBinary(t)
	ensureBins(t)
	modes := fields(t, "BENCH_LIVE_QUICK_MODES", "nftables iptables-nft cilium")
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			res := Run(context.Background(), Config{
				Mode: mode, Endpoints: 1000, Rates: []float64{5}, Window: 30 * time.Second, Idle: 5 * time.Second,
				SyncTimeout: 3 * time.Minute, Drain: time.Minute, Agent: bin, OfflineRuns: 1,
				LabName: labPrefix() + "q" + Modes[mode].Short, Logf: t.Logf,
			})
			var buf bytes.Buffer
			res.Write(&buf)
			t.Log("\n" + buf.String())
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if len(res.Churn) != 1 {
				t.Fatalf("%d churn windows, want 1", len(res.Churn))
			}
			w := res.Churn[0]
			if w.Changes == 0 || w.ChangeErrors > 0 {
				t.Errorf("changes made %d, failed %d", w.Changes, w.ChangeErrors)
			}
			if !res.WatchOnly {
				t.Errorf("the watch-only reference did not run: %v", res.Notes)
			}
			if w.Agent.Total() <= 0 || w.Proxy.Total() <= 0 {
				t.Errorf("CPU not measured: agent %s, %s %s", w.Agent.Total(), proxyName(mode), w.Proxy.Total())
			}
			if w.PendingAtEnd > 0 {
				t.Errorf("%d changes still pending %s after the window", w.PendingAtEnd, w.DrainTook)
			}
			if m := w.Missing(); m != 0 {
				t.Errorf("%d changes, %d samples, %d superseded, %d pending: %d changes have neither a sample nor a counted reason",
					w.Changes, w.Samples, w.Superseded, w.PendingAtEnd, m)
			}
			if w.SamplesMetric != w.Samples {
				t.Errorf("/v1/lag listed %d samples, netdrift_node_programming_lag_seconds_count grew by %d", w.Samples, w.SamplesMetric)
			}
		})
	}
}

// labPrefix is NETDRIFT_LAB_PREFIX, else "bl" (the fixed names that
// `make bench-live` and `make test-bench-live-quick` run under the lab lock).
func labPrefix() string {
	if p := os.Getenv("NETDRIFT_LAB_PREFIX"); p != "" {
		return p
	}
	return "bl"
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, iptables/nft")
	}
}

func agentBinary(t *testing.T) string {
	p := os.Getenv("NETDRIFT_BIN")
	if p == "" {
		p = filepath.Join(labenv.ModuleDir(), "..", "bin", "netdrift")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("netdrift binary %s: %v (run `make build`, or set NETDRIFT_BIN)", abs, err)
	}
	return abs
}

func ensureBins(t *testing.T) {
	if err := labenv.EnsureBinaries(labenv.DefaultBinDir(), os.Stderr); err != nil {
		t.Fatal(err)
	}
}

func fields(t *testing.T, env, def string) []string {
	v := os.Getenv(env)
	if strings.TrimSpace(v) == "" {
		v = def
	}
	return strings.Fields(v)
}

func seconds(t *testing.T, env string, def int) time.Duration {
	v := os.Getenv(env)
	if v == "" {
		return time.Duration(def) * time.Second
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n <= 0 {
		t.Fatalf("%s: %q", env, v)
	}
	return time.Duration(n * float64(time.Second))
}
