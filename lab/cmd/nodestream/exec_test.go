package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilexec "k8s.io/utils/exec"
)

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// TestExecInContainer: the command is found on the container's PATH (the
// netdrift binary's directory first), its output and exit status reach the
// streaming server as a kubelet's runtime returns them.
func TestExecInContainer(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "netdrift"), []byte("#!/bin/sh\necho \"agent $*\"\necho warn >&2\nexit 4\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &execServer{binDir: dir}
	var out, serr bytes.Buffer
	err := s.ExecInContainer(context.Background(), "p", "", "agent", []string{"netdrift", "status"}, nil, nopCloser{&out}, nopCloser{&serr}, false, nil, 0)
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || !exit.Exited() || exit.ExitStatus() != 4 {
		t.Errorf("exit: %v, want the exit status 4", err)
	}
	if out.String() != "agent status\n" || serr.String() != "warn\n" {
		t.Errorf("stdout %q, stderr %q", out.String(), serr.String())
	}
	err = s.ExecInContainer(context.Background(), "p", "", "agent", []string{"no-such-command"}, nil, nopCloser{&out}, nopCloser{&serr}, false, nil, 0)
	if err == nil || !strings.Contains(err.Error(), `"no-such-command": executable file not found in $PATH`) {
		t.Errorf("unknown command: %v", err)
	}
}

// TestForwardLoopback: the agent's local listener forwards to the same
// port of the node IP.
func TestForwardLoopback(t *testing.T) {
	backend, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		c, err := backend.Accept()
		if err == nil {
			_, _ = io.WriteString(c, "from the agent")
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(backend.Addr().String())
	s := &execServer{localListen: net.JoinHostPort("127.0.0.1", port), dialIP: "127.0.0.2"}
	if err := s.forwardLoopback(); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", s.localListen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "from the agent" {
		t.Errorf("through the loopback listener: %q, %v", b, err)
	}
}
