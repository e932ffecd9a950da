package iptables

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandsReason: the image's commands and versions go into the
// datapath reason; commands that cannot run make a note instead.
func TestCommandsReason(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"iptables-nft", "iptables-legacy"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := os.Getenv("PATH")
	t.Setenv("PATH", dir) // found first: both fail
	reason, note, summary := CommandsReason("KUBE-SERVICES found")
	if reason != "KUBE-SERVICES found" || !strings.Contains(note, "no iptables command runs") || !strings.Contains(note, "iptables-nft: ") {
		t.Errorf("broken commands: reason %q, note %q", reason, note)
	}
	if !strings.Contains(summary, "iptables-legacy") {
		t.Errorf("summary %q", summary)
	}

	t.Setenv("PATH", path+":/usr/sbin:/sbin")
	if _, err := exec.LookPath("iptables-nft"); err != nil {
		t.Skipf("iptables-nft not installed: %v", err)
	}
	reason, note, _ = CommandsReason("KUBE-SERVICES found")
	if note != "" || !strings.HasPrefix(reason, "KUBE-SERVICES found; iptables commands: iptables-nft v") {
		t.Errorf("installed commands: reason %q, note %q", reason, note)
	}
}
