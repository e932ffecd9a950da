package nfevents

import (
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/vmtest"
)

// TestCommitStampInVM runs the commit stamp's real-kernel tests inside a VM
// with Debian's 6.1 kernel: the filter must load there, and each commit's
// NEWGEN must still come in a datagram of its own after the commit's other
// notifications (what bpf/stamp.c counts on), on a kernel older than this
// machine's.
func TestCommitStampInVM(t *testing.T) {
	vmtest.RunOwnTests(t, "nfevents", []string{"TestStamperDatesByTheKernel", "TestWatcherDatesByTheKernel"},
		vmtest.Config{Timeout: 6 * time.Minute})
}
