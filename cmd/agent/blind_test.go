package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/cli"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// lockedBuffer is a bytes.Buffer the agent process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Issue 35 item 1: a blind agent does not look healthy. The real agent
// runs pointed at an API server address where nothing listens (loopback
// port 1), reading a network namespace this test creates. Within seconds
// its log names the API error, /readyz is not ready, /v1/drift carries
// view.current=false with the connection error, and `netdrift drift`
// exits 3 with "no view: ...".
func TestBlindAgentSaysSo(t *testing.T) {
	base, logs, started := startBlindAgent(t, "ndblind")
	waitFor(t, 5*time.Second, "the API error in the agent's log", func() bool {
		return strings.Contains(logs.String(), `"msg":"API server request failed`) && strings.Contains(logs.String(), "connection refused")
	})
	t.Logf("API error logged %s after the start", time.Since(started).Round(time.Millisecond))

	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "connection refused") {
		t.Errorf("/readyz: %d %q; want 503 naming the refused connection", resp.StatusCode, body)
	}
	var d api.Drift
	if err := api.NewClient(base).Get(t.Context(), "/v1/drift", &d); err != nil {
		t.Fatal(err)
	}
	if d.View == nil || d.View.Current || d.View.Code != "api_failing" || !strings.Contains(d.View.LastError, "127.0.0.1:1") ||
		!strings.Contains(d.View.LastError, "connection refused") || d.View.Since.IsZero() {
		t.Errorf("/v1/drift view %+v; want not current, api_failing, the refused dial to 127.0.0.1:1", d.View)
	}
	out, errs, code := runBin(t, selfBinary(t), "drift", "--agent", base)
	if code != cli.ExitNoView || !strings.HasPrefix(out, "no view: list/watch requests to the API server fail") ||
		!strings.Contains(out, "last error: ") || !strings.Contains(out, "connection refused") {
		t.Errorf("netdrift drift: exit %d, stdout %q, stderr %q; want exit 3 and the no view line", code, out, errs)
	}
	// Three more rounds of refused dials (five informers, every 500 ms,
	// jittered): still one line.
	failures := regexp.MustCompile(`\((\d+) failed since`)
	waitFor(t, 10*time.Second, "twenty failed requests", func() bool {
		var d api.Drift
		if err := api.NewClient(base).Get(t.Context(), "/v1/drift", &d); err != nil || d.View == nil {
			return false
		}
		m := failures.FindStringSubmatch(d.View.Reason)
		if m == nil {
			return false
		}
		n, _ := strconv.Atoi(m[1])
		return n >= 20
	})
	if n := strings.Count(logs.String(), `"msg":"API server request failed`); n != 1 {
		t.Errorf("%d failure lines for the first failures; want 1 (then at most one per %s)", n, agent.APILogEvery)
	}
}

// startBlindAgent runs the real agent (extra flags appended) pointed at an
// API server address where nothing listens (loopback port 1), reading a
// network namespace named after netns; it returns the agent's API base URL,
// its log and when it started. The agent is stopped when the test ends.
func startBlindAgent(t *testing.T, netns string, extra ...string) (string, *lockedBuffer, time.Time) {
	ns := netnstest.New(t, netns)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := selfBinary(t)
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "agent", "--node-name", "blind-node", "--kubeconfig", kc, "--netns", ns,
		"--listen", "127.0.0.1:0", "--no-rst-probe", "--api-reconnect-interval", "500ms")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(os.Environ(), "NETDRIFT_AS_MAIN=1")
	cmd.Stdout, cmd.Stderr = io.Discard, logs
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("the agent did not stop within 15 s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})

	serving := regexp.MustCompile(`"msg":"serving","addr":"(127\.0\.0\.1:\d+)"`)
	var base string
	waitFor(t, 10*time.Second, "the agent serving its API", func() bool {
		if m := serving.FindStringSubmatch(logs.String()); m != nil {
			base = "http://" + m[1]
		}
		return base != ""
	})
	return base, logs, started
}

// TestWatchNodesOwnNoted: an agent run with --watch-nodes=own says in
// /v1/status's notes which checks it does not run.
func TestWatchNodesOwnNoted(t *testing.T) {
	base, _, _ := startBlindAgent(t, "ndownnode", "--watch-nodes=own")
	var st api.Status
	if err := api.NewClient(base).Get(t.Context(), "/v1/status", &st); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(st.Notes, ownNodeNote) {
		t.Errorf("/v1/status notes %q lack %q", st.Notes, ownNodeNote)
	}
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
