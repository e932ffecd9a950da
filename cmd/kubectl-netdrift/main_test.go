package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/cli"
)

func TestHelpNamesThePlugin(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb); code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"kubectl netdrift [command]", "--kubeconfig", "--context", "--agent-namespace", "cluster", "explain"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestNodeCommandsNeedANode(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"status"}, &out, &errb); code != cli.ExitError || !strings.Contains(errb.String(), `required flag(s) "node" not set`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"explain", "--node", "n1"}, &out, &errb); code != cli.ExitError || !strings.Contains(errb.String(), "expected 1 argument") {
		t.Fatalf("explain without NAMESPACE/NAME: exit %d, stderr %q", code, errb.String())
	}
}

func TestUnreadableKubeconfig(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("not: [a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"status", "--node", "n1", "--kubeconfig", kc}, &out, &errb)
	if code != cli.ExitError || !strings.Contains(errb.String(), "kubectl netdrift status:") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

func TestBadAgentSelector(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"status", "--node", "n1", "--agent-selector", "app in (", "--server", "https://127.0.0.1:1"}, &out, &errb)
	if code != cli.ExitError || !strings.Contains(errb.String(), `agent selector "app in ("`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
