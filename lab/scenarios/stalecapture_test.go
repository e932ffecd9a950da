package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// staleFrontends returns node's stale_frontend findings.
func staleFrontends(ctx context.Context, a *Agent) ([]Finding, error) {
	var d Drift
	if err := a.Get(ctx, "/v1/drift", &d); err != nil {
		return nil, err
	}
	return findingsOf(d, "stale_frontend", ""), nil
}

// captureStaleFrontends saves, for every node whose agent holds a
// stale_frontend finding, what tells an agent-only view apart from a rule
// still in the kernel: the agent's drift, status and view of the Service,
// the kernel's nat table (iptables-nft-save in the node's namespace), a
// fresh full read of it (netdrift snapshot --netns) and the tails of
// kube-proxy's and the agent's logs. It returns the directory written
// ("" when no node holds one); dir is NETDRIFT_LAB_CAPTURE or a temp dir.
func captureStaleFrontends(t *testing.T, l *labenv.Lab, agents []*Agent, why string) string {
	ctx := context.Background()
	root := os.Getenv("NETDRIFT_LAB_CAPTURE")
	if root == "" {
		root = os.TempDir()
	}
	dir := filepath.Join(root, "stale-"+time.Now().UTC().Format("150405.000"))
	wrote := false
	for _, a := range agents {
		n := a.Node
		fs, err := staleFrontends(ctx, a)
		if err != nil || len(fs) == 0 {
			continue
		}
		wrote = true
		nd := filepath.Join(dir, n)
		if err := os.MkdirAll(nd, 0o755); err != nil {
			t.Logf("capture: %v", err)
			return ""
		}
		save := func(name string, b []byte, err error) {
			if err != nil {
				b = append(b, []byte("\nerror: "+err.Error()+"\n")...)
			}
			_ = os.WriteFile(filepath.Join(nd, name), b, 0o644)
		}
		for _, p := range []string{"/v1/drift", "/v1/status"} {
			b, err := a.Raw(ctx, p)
			save(strings.ReplaceAll(strings.TrimPrefix(p, "/v1/"), "/", "_")+".json", b, err)
		}
		seen := map[string]bool{}
		for _, f := range fs {
			if seen[f.Service] || f.Service == "" {
				continue
			}
			seen[f.Service] = true
			b, err := a.Raw(ctx, "/v1/services/"+f.Service)
			save("service_"+strings.ReplaceAll(f.Service, "/", "_")+".json", b, err)
		}
		b, err := l.Exec(n, "iptables-nft-save", "-t", "nat")
		save("iptables-nft-save-nat.txt", b, err)
		b, err = l.Exec(n, "nft", "list", "table", "ip", "nat")
		save("nft-list-ip-nat.txt", b, err)
		if ns, err := l.NodeNetNS(n); err == nil {
			if bin, err := agentBinary(); err == nil {
				b, err := exec.Command(bin, "snapshot", "--netns", ns, "-o", "json").CombinedOutput()
				save("snapshot-netns.json", b, err)
			}
		}
		save("kube-proxy.log", tail(l.LogPath("kube-proxy/"+n), 400000), nil)
		save("agent.log", tail(l.LogPath("agent/"+n), 400000), nil)
		js, _ := json.MarshalIndent(fs, "", "  ")
		t.Logf("capture (%s): %s holds %d stale_frontend findings %s; saved to %s", why, n, len(fs), js, nd)
	}
	if !wrote {
		return ""
	}
	_ = os.WriteFile(filepath.Join(dir, "why.txt"), []byte(why+"\n"), 0o644)
	return dir
}

func tail(path string, n int) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return []byte(fmt.Sprintf("reading %s: %v", path, err))
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return b
}

// watchStaleFrontends captures (captureStaleFrontends) the first time, and
// again a minute later, that any node holds a stale_frontend finding older
// than minAge, until the returned stop is called.
func watchStaleFrontends(t *testing.T, l *labenv.Lab, minAge time.Duration) (stop func()) {
	agents := agentsOf(t, l) // here: agent() fails the test, which a goroutine must not
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var last time.Time
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Second):
			}
			if !last.IsZero() && time.Since(last) < time.Minute {
				continue
			}
			for _, a := range agents {
				fs, err := staleFrontends(context.Background(), a)
				if err != nil {
					continue
				}
				old := false
				for _, f := range fs {
					old = old || f.AgeSeconds != nil && *f.AgeSeconds > minAge.Seconds()
				}
				if old {
					captureStaleFrontends(t, l, agents, fmt.Sprintf("%s holds a stale_frontend finding older than %s", a.Node, minAge))
					last = time.Now()
					break
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}
