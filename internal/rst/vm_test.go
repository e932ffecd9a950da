package rst

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/vmtest"
)

// TestFallbackInVM runs this package's probe tests inside a VM with Debian's
// 6.1 kernel, where tcp/tcp_send_reset does not fire for resets sent without a
// socket: the probe must choose fentry on its own and count exactly there.
func TestFallbackInVM(t *testing.T) {
	tests := []string{"TestOldKernelPicksFentry", "TestExactCountsFentry", "TestSentToWatchedFentry",
		"TestActiveResetFentry", "TestPortFilterAndUnwatch", "TestEvents", "TestRunTrace", "TestLoadWithoutPrivileges"}
	// Under TCG (no usable KVM) each probe load takes seconds.
	vmtest.RunOwnTests(t, "rst", tests, vmtest.Config{Timeout: 12 * time.Minute})
}

// TestOldKernelPicksFentry runs only in the VM: on a kernel older than 6.10
// automatic selection must reject the tracepoint (old layout) and use fentry.
func TestOldKernelPicksFentry(t *testing.T) {
	if os.Getenv("NETDRIFT_IN_VM") != "1" {
		t.Skip("runs inside the 6.1 VM (TestFallbackInVM)")
	}
	p := loadProbe(t, "")
	st := p.Status()
	if st.Mode != ModeFentry || strings.Count(st.Reason, "older than 6.10") != 2 {
		t.Errorf("status %+v, want fentry chosen because the tracepoint and its BTF form are older than 6.10", st)
	}
}
