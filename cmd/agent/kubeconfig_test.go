package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/netdrift/netdrift/internal/cli"
)

// kubeconfigFlags parses the agent's kubectl client flags from args.
func kubeconfigFlags(t *testing.T, args ...string) cli.KubeConfig {
	t.Helper()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	var f agentFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.kube
}

// writeKubeconfig writes a kubeconfig whose one context points at server.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	text := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + server + "\"}}]\n" +
		"users: [{name: u, user: {token: t0}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}, {name: other, context: {cluster: c2, user: u}}]\n" +
		"current-context: x\n"
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadConfigOrder: --kubeconfig, then $KUBECONFIG, then the in-cluster
// configuration, as client-go's tools load them; --server overrides the
// file's server as kubectl's flag does.
func TestLoadConfigOrder(t *testing.T) {
	fromEnv := writeKubeconfig(t, "https://192.0.2.10:6443")
	fromFlag := writeKubeconfig(t, "https://192.0.2.20:6443")
	// A pod's environment: $KUBECONFIG and the flag must still win.
	t.Setenv("KUBERNETES_SERVICE_HOST", "192.0.2.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	t.Setenv("KUBECONFIG", fromEnv)
	for _, c := range []struct {
		args []string
		host string
	}{
		{nil, "https://192.0.2.10:6443"},
		{[]string{"--kubeconfig", fromFlag}, "https://192.0.2.20:6443"},
		{[]string{"--server", "https://192.0.2.30:6443"}, "https://192.0.2.30:6443"},
	} {
		cfg, err := kubeconfigFlags(t, c.args...).Load()
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if cfg.Host != c.host || cfg.BearerToken != "t0" {
			t.Errorf("%v with $KUBECONFIG=%s: host %q token %q, want %s and the file's token", c.args, fromEnv, cfg.Host, cfg.BearerToken, c.host)
		}
	}
	if _, err := kubeconfigFlags(t, "--context", "nonexistent").Load(); err == nil {
		t.Error("--context nonexistent: no error")
	}
	// No flag, no $KUBECONFIG, in a pod: the in-cluster configuration
	// (whose token file this test machine lacks: its error, not a kubeconfig's).
	if _, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token"); err == nil {
		t.Skip("this machine has a service account token: the in-cluster case cannot fail here")
	}
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	if _, err := kubeconfigFlags(t).Load(); err == nil || !contains(err.Error(), "serviceaccount") {
		t.Errorf("in a pod without $KUBECONFIG: %v, want the in-cluster token's error", err)
	}
	// Not in a pod, nothing configured: an error saying what to pass.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := kubeconfigFlags(t).Load(); err == nil || !contains(err.Error(), "--kubeconfig") {
		t.Errorf("nothing configured: %v, want a hint naming --kubeconfig", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
