package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/runtimetune"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// TestAgentFlagsValidatedUpFront: every bad flag is refused before anything
// starts, with an error that names the flag.
func TestAgentFlagsValidatedUpFront(t *testing.T) {
	cases := [][]string{
		{"--datapath", "ebpf"},
		{"--rst-probe-mode", "kprobe"},
		{"--cilium-write-stamp", "kprobe"},
		{"--route-mode", "mesh"},
		{"--watch-nodes", "some"},
		{"--cluster-cidr", "10.244.0.0/16,nonsense"},
		{"--log-level", "loud"},
		{"--fast-poll", "0s"},
		{"--rst-window", "-1s"},
		{"--max-service-series", "0"},
		{"--max-procs", "-1"},
		{"--event-poll", "0s"},
		{"--full-audit-interval", "-1m"},
		{"--pprof-listen", "0.0.0.0:9762"},
		{"--pprof-listen", "9762"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		args := append([]string{"agent", "--node-name", "n1", "--kubeconfig", "/nonexistent"}, c...)
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", c, code)
		}
		if !strings.Contains(errb.String(), c[0]) {
			t.Errorf("%v: error %q does not name the flag", c, errb.String())
		}
		if strings.Contains(errb.String(), "kubeconfig") {
			t.Errorf("%v: the kubeconfig was read before the flags were checked: %q", c, errb.String())
		}
	}
}

// TestAgentProcs: GOMAXPROCS is 1 by default, $GOMAXPROCS wins over the
// default and --max-procs over both.
func TestAgentProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	parse := func(args ...string) (*pflag.FlagSet, agentFlags) {
		fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
		var f agentFlags
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return fs, f
	}
	runtime.GOMAXPROCS(2)
	t.Setenv("GOMAXPROCS", "")
	fs, f := parse()
	if runtimetune.Procs(f.maxProcs, fs.Changed("max-procs"), os.Getenv); runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("default: GOMAXPROCS %d, want 1", runtime.GOMAXPROCS(0))
	}
	runtime.GOMAXPROCS(2)
	t.Setenv("GOMAXPROCS", "2")
	if runtimetune.Procs(f.maxProcs, fs.Changed("max-procs"), os.Getenv); runtime.GOMAXPROCS(0) != 2 {
		t.Errorf("$GOMAXPROCS=2, no flag: GOMAXPROCS %d, want 2", runtime.GOMAXPROCS(0))
	}
	fs, f = parse("--max-procs=1")
	if runtimetune.Procs(f.maxProcs, fs.Changed("max-procs"), os.Getenv); runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("$GOMAXPROCS=2, --max-procs=1: GOMAXPROCS %d, want 1", runtime.GOMAXPROCS(0))
	}
}

// TestAPICompression: the client asks for gzip only with --api-compression
// (the header the API server decides by, seen by a TLS server standing in
// for it: over plain HTTP client-go uses the default transport whatever the
// setting, and the agent always talks TLS).
func TestAPICompression(t *testing.T) {
	for _, on := range []bool{false, true} {
		var got atomic.Value
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got.Store(r.Header.Get("Accept-Encoding"))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
		}))
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		cfgText := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + srv.URL + "\", insecure-skip-tls-verify: true}}]\n" +
			"users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
		if err := os.WriteFile(kc, []byte(cfgText), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := kubeconfigFlags(t, "--kubeconfig", kc).Load()
		if err != nil {
			t.Fatal(err)
		}
		informer.ClientSettings(cfg, "netdrift/test", on)
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		enc, _ := got.Load().(string)
		if asks := strings.Contains(enc, "gzip"); asks != on {
			t.Errorf("--api-compression=%v: Accept-Encoding %q", on, enc)
		}
	}
}

// TestPprofHandler: the profiles --pprof-listen serves are Go's own.
func TestPprofHandler(t *testing.T) {
	srv := httptest.NewServer(api.PprofHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(b.String(), "heap profile") {
		t.Errorf("heap profile: status %d, body %.80q", resp.StatusCode, b.String())
	}
}

// TestAgentCommandLine: `netdrift agent --help` prints on stdout and exits
// 0 showing kubectl's client flags; a single-dash long flag (Go's flag
// package took it, pflag does not) exits 2 naming it; --datapath completes
// its modes.
func TestAgentCommandLine(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"agent", "--help"}, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("agent --help: exit %d, stderr %q", code, errb.String())
	}
	for _, flag := range []string{"--kubeconfig string", "--context string", "--server string", "--node-name NAME", "--datapath MODE"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("agent --help lacks %q", flag)
		}
	}
	out.Reset()
	if code := run([]string{"agent", "-node-name", "n1"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "-node-name") {
		t.Errorf("agent -node-name: exit %d, stderr %q", code, errb.String())
	}
	out.Reset()
	run([]string{"__complete", "agent", "--datapath", "ip"}, &out, &errb)
	if got := strings.Fields(out.String()); len(got) != 3 || got[0] != "iptables" || got[1] != "ipvs" {
		t.Errorf("complete agent --datapath ip: %q", out.String())
	}
}
