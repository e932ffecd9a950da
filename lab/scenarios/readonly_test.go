package scenarios

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// testReadOnly: with kube-proxy stopped on a node, a full agent run (a fresh
// agent: start, sync, audits of every source, every endpoint queried, stop)
// leaves iptables-save, nft list ruleset, routes, links and conntrack
// byte-identical (after removing what changes by itself: iptables-save's
// header comments and chain counters, nft counters, conntrack timers, and the
// flows of the agents' and the test's own sockets).
func testReadOnly(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	node := "node-2"
	cip, _ := service(t, l, "ro", []string{"node-3"}, 0)
	if err := l.StopKubeProxy(node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.StartKubeProxy(context.Background(), node); err != nil {
			t.Errorf("restart kube-proxy on %s: %v", node, err)
		}
	})
	// Long-lived connections through the ClusterIP, kept busy with keep-alive
	// requests so they stay ESTABLISHED: conntrack entries with DNAT for the
	// agent's conntrack reader to see.
	keepCtx, stopKeep := context.WithCancel(ctx)
	t.Cleanup(stopKeep)
	for i := 0; i < 3; i++ {
		c, err := l.DialContext(ctx, node, "tcp", net.JoinHostPort(cip, "80"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go keepAlive(keepCtx, c)
	}
	time.Sleep(time.Second)
	before := datapathState(t, l, node)

	bin, err := agentBinary()
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, l, bin, node)

	after := datapathState(t, l, node)
	for _, k := range stateKeys {
		if before[k] != after[k] {
			t.Errorf("%s on %s changed during the agent run:\n%s", k, node, lineDiff(before[k], after[k]))
		} else {
			t.Logf("%s: identical (%d lines)", k, strings.Count(before[k], "\n"))
		}
	}
}

// runAgent runs a second agent on node (port 9761) through a whole life:
// start, ready, audits on a 1 s interval, every endpoint queried, SIGTERM.
func runAgent(t *testing.T, l *labenv.Lab, bin, node string) {
	t.Helper()
	ns, err := l.NodeNetNS(node)
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	for _, n := range l.Nodes() {
		if n.Name == node {
			ip = n.IP
		}
	}
	logf, err := os.Create(l.LogPath("agent-readonly/" + node))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	addr := net.JoinHostPort(ip, "9761")
	cmd := exec.Command("ip", "netns", "exec", ns, bin, "agent", "--node-name", node, "--kubeconfig", l.Kubeconfig(),
		"--listen", addr, "--audit-interval", "1s", "--stale-after", staleAfter.String())
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	c, _ := l.HTTPClient(node)
	a := &Agent{Node: node, Base: "http://" + addr, HTTP: c}
	eventually(t, 60*time.Second, 300*time.Millisecond, "second agent ready", func() (bool, string) {
		var st Status
		err := a.Get(context.Background(), "/v1/status", &st)
		return err == nil && st.Ready, fmt.Sprintf("%v %s", err, st.ReadyReason)
	})
	time.Sleep(3500 * time.Millisecond) // several full audits (routes, links, conntrack)
	for _, p := range []string{"/v1/status", "/v1/drift", "/v1/lag", "/v1/rsts", "/v1/services/default/ro", "/metrics", "/healthz", "/readyz"} {
		if _, err := a.Raw(context.Background(), p); err != nil {
			t.Errorf("second agent %s: %v", p, err)
		}
	}
	var st Status
	if err := a.Get(context.Background(), "/v1/status", &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("second agent on %s: datapath %s, ready %v, findings %d", node, st.Datapath, st.Ready, st.Findings)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Errorf("second agent did not exit 15 s after SIGTERM")
		_ = cmd.Process.Kill()
		<-exited
	}
	stopped = true
}

// keepAlive sends a keep-alive HTTP request on c every 500 ms.
func keepAlive(ctx context.Context, c net.Conn) {
	buf := make([]byte, 4096)
	for ctx.Err() == nil {
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: ro\r\n\r\n")); err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(buf); err != nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

var stateKeys = []string{"iptables-save", "nft list ruleset", "routes", "links", "conntrack"}

// datapathState captures node's datapath in a comparable form.
func datapathState(t *testing.T, l *labenv.Lab, node string) map[string]string {
	t.Helper()
	run := func(name string, args ...string) string {
		out, err := l.Exec(node, name, args...)
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return string(out)
	}
	return map[string]string{
		"iptables-save":    NormalizeIPTablesSave(run("iptables-save")),
		"nft list ruleset": run("nft", "-s", "list", "ruleset"),
		"routes": run("ip", "-d", "route", "show", "table", "all") +
			run("ip", "-6", "-d", "route", "show", "table", "all"),
		"links": run("ip", "-d", "link", "show"),
		// stdout only: conntrack's summary on stderr can land inside a line.
		"conntrack": NormalizeConntrack(run("sh", "-c", "conntrack -L 2>/dev/null"), []string{"6443", "9760", "9761"}),
	}
}

func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	in := func(s string, set []string) bool {
		for _, x := range set {
			if x == s {
				return true
			}
		}
		return false
	}
	var out []string
	for _, x := range al {
		if !in(x, bl) {
			out = append(out, "- "+x)
		}
	}
	for _, x := range bl {
		if !in(x, al) {
			out = append(out, "+ "+x)
		}
	}
	return strings.Join(out, "\n")
}
