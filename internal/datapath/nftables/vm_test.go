package nftables

import (
	"os"
	"strings"
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
	if os.Getenv("NETDRIFT_IN_VM") != "" {
		t.Skip("already inside the VM")
	}
	bin := vmtest.BuildTest(t, ".")
	tests := []string{"TestStamperDatesByTheKernel", "TestWatcherDatesByTheKernel"}
	res, err := vmtest.Run(t, vmtest.Config{
		TestBinaries: map[string]string{"nftables": bin},
		Args:         []string{"-test.run=^(" + strings.Join(tests, "|") + ")$", "-test.count=1"},
		Timeout:      6 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	res.RequirePass(t, "nftables", tests...)
}
