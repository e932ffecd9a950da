// Package netnstest gives tests network namespaces of their own: created
// with iproute2's `ip netns add` under names unique to the test process,
// deleted when the test ends (passed, failed or skipped), and helpers to
// run commands or Go code inside them. Tests that use it never touch the
// host's own namespace.
package netnstest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

var seq atomic.Int64

// RequireRoot skips the test unless it runs as root; why says what needs it.
func RequireRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skipf("needs root: %s", why)
	}
}

// Name returns prefix-<pid>-<n>, a namespace name no other test of this or
// any concurrent test process uses.
func Name(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1))
}

// New creates a fresh namespace named Name(prefix), deleted at cleanup.
func New(tb testing.TB, prefix string) string {
	tb.Helper()
	return Add(tb, Name(prefix))
}

// Add creates the namespace name and deletes it at cleanup; a test may
// delete it earlier itself. It skips without root or without the ip command.
func Add(tb testing.TB, name string) string {
	tb.Helper()
	RequireRoot(tb, "creates network namespaces")
	ip, err := ipCommand()
	if err != nil {
		tb.Skipf("no ip command (iproute2): %v", err)
	}
	if out, err := exec.Command(ip, "netns", "add", name).CombinedOutput(); err != nil {
		tb.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	tb.Cleanup(func() {
		out, err := exec.Command(ip, "netns", "del", name).CombinedOutput()
		if err != nil && exists(name) {
			tb.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return name
}

// exists reports whether the namespace name is still there.
func exists(name string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", name))
	return !errors.Is(err, os.ErrNotExist)
}

// ipCommand finds ip in PATH or in the sbin directories PATH often lacks.
func ipCommand() (string, error) {
	path, err := exec.LookPath("ip")
	if err == nil {
		return path, nil
	}
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if _, serr := os.Stat(p); serr == nil {
			return p, nil
		}
	}
	return "", err
}

// Cmd returns a command that runs argv inside namespace ns.
func Cmd(ns string, argv ...string) *exec.Cmd {
	ip, err := ipCommand()
	if err != nil {
		ip = "ip" // running it fails and says so
	}
	return exec.Command(ip, append([]string{"netns", "exec", ns}, argv...)...)
}

// Run runs argv inside ns and returns its standard output; it fails the
// test, with the command's standard error, if the command fails.
func Run(tb testing.TB, ns string, argv ...string) []byte {
	tb.Helper()
	return RunInput(tb, ns, "", argv...)
}

// RunInput is Run with stdin as the command's standard input.
func RunInput(tb testing.TB, ns, stdin string, argv ...string) []byte {
	tb.Helper()
	cmd := Cmd(ns, argv...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("in netns %s: %s: %v: %s", ns, strings.Join(argv, " "), err, stderr.String())
	}
	return out
}
