package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 35 item 2: inputs are bounded. /dev/zero given as a dump or a
// cluster file is refused before it is read, with nothing on stdout (the
// size limit itself: clusterfile's TestReadInputLimit).
func TestDiffRefusesUnboundedInput(t *testing.T) {
	bin := selfBinary(t)
	dir := filepath.Join(corpusDir, "dualstack-iptables-v4-only")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"dump", []string{"diff", "--node", "node-a", "--cluster", "cluster.json", "--iptables-save", "/dev/zero"},
			"netdrift diff: --iptables-save /dev/zero is a device, not a capture file: give the file the capture was saved to\n"},
		{"cluster", []string{"diff", "--node", "node-a", "--cluster", "/dev/zero", "--iptables-save", "node-a.iptables-save"},
			"netdrift diff: --cluster /dev/zero is a device, not a capture file: give the file the capture was saved to\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			out, errs, code := runIn(t, dir, bin, c.args...)
			if code != 2 || out != "" || errs != c.want {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errs, c.want)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// Issue 35 item 2: a live read without privileges says to run as root or
// which capabilities are missing. The real binary runs as user nobody and
// enters a network namespace this test creates.
func TestSnapshotNetnsWithoutPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace and to run a process as nobody")
	}
	ns := fmt.Sprintf("ndtrust-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	bin := copyForNobody(t, selfBinary(t))
	cmd := exec.Command(bin, "snapshot", "--netns", ns)
	cmd.Env = append(os.Environ(), "NETDRIFT_AS_MAIN=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || out.Len() != 0 {
		t.Fatalf("err %v, stdout %q, stderr %q; want exit 2", err, out.String(), errb.String())
	}
	if want := "needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN (setns into --netns)"; !strings.Contains(errb.String(), want) ||
		strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("stderr %q: want one line containing %q", errb.String(), want)
	}
}

// copyForNobody copies the test binary into a directory user nobody can
// reach (the build directory is private to root).
func copyForNobody(t *testing.T, src string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ndtrust-bin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(dir, "netdrift")
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(o, in); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}
