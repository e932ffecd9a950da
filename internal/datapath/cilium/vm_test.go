package cilium

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/vmtest"
)

// TestWriteStampInVM runs the map-write stamp's real-kernel tests inside a
// VM with Debian's 6.1 kernel, which allows fexit programs (this machine's
// kernel refuses them): the stamp must pick its fexit mode there and date
// every write as its tracepoint mode does here.
func TestWriteStampInVM(t *testing.T) {
	vmtest.RunOwnTests(t, "cilium", []string{"TestWriteStampPicksFexit", "TestWriteStampDatesEachWrite", "TestWriteStampWatchSet",
		"TestWriteStampPrecision", "TestReaderDatesByTheWriteStamp", "TestReaderFexitOnly"}, vmtest.Config{Timeout: 6 * time.Minute})
}

// TestWriteStampPicksFexit runs only in the VM: where fexit programs load,
// the stamp uses them, not the system-call tracepoints every system call
// pays for.
func TestWriteStampPicksFexit(t *testing.T) {
	if os.Getenv("NETDRIFT_IN_VM") != "1" {
		t.Skip("runs inside the 6.1 VM (TestWriteStampInVM)")
	}
	privateBPFFS(t) // root
	s, err := attachStampMode(stampFexit, unix.SYS_BPF)
	if err != nil {
		t.Fatalf("fexit mode: %v", err)
	}
	s.close()
	if s := attachStampT(t); s.mode != stampFexit {
		t.Errorf("the stamp attached in mode %s, want %s", s.mode, stampFexit)
	}
}
