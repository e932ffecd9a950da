package vmtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// SkipUnlessReady skips t, with the reason, when a VM test cannot run
// here: under -short (a VM test boots a kernel, and its first run
// downloads one), when not root, or when a host tool the harness needs is
// missing (qemu, a static busybox). `make vm-deps` installs the tools,
// `make vm-kernel` fetches the kernel. It runs before anything is built or
// downloaded.
func SkipUnlessReady(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("vmtest: -short skips the VM tests (they boot a kernel; the first run downloads it)")
	}
	if os.Geteuid() != 0 {
		t.Skip("vmtest: needs root (qemu, depmod, cached kernel owned by root)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("vmtest: qemu-system-x86_64 not installed (Debian package qemu-system-x86; make vm-deps)")
	}
	if _, err := staticBusybox(); err != nil {
		t.Skipf("vmtest: %v (make vm-deps)", err)
	}
}

// staticBusybox finds busybox and checks that it is statically linked (the
// guest has no shared libraries).
func staticBusybox() (string, error) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return "", fmt.Errorf("busybox not found (install busybox-static): %w", err)
	}
	if out, err := exec.Command("ldd", bb).CombinedOutput(); err == nil && !strings.Contains(string(out), "not a dynamic") {
		return "", fmt.Errorf("%s is dynamically linked; install busybox-static", bb)
	}
	return bb, nil
}
