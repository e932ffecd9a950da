package nftables

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// TestSnapshotDuringCommits: commits land while the reader's full read runs
// (another table is created and deleted in a loop for the read's first
// 60 ms). The read must notice the generation moved and read again — the
// tables it returns are the quiet read's, with no "kept changing" warning.
func TestSnapshotDuringCommits(t *testing.T) {
	ns := nftTestNetns(t)
	path := filepath.Join(t.TempDir(), "gen.nft")
	if err := os.WriteFile(path, []byte(nftGen10k.text()), 0o644); err != nil {
		t.Fatal(err)
	}
	nftIn(t, ns, "nft", "-f", path)
	quiet := &Reader{Config: Config{NetNS: ns}}
	want, err := quiet.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	commits := netnstest.StartCommits(t, ns)
	time.Sleep(50 * time.Millisecond) // the loop is committing
	nr := &Reader{Config: Config{NetNS: ns}}
	commits.Begin()
	got, err := nr.Snapshot(context.Background())
	n := commits.Wait()
	if err != nil {
		t.Fatalf("read during %d commits: %v", n, err)
	}
	t.Logf("%d commits; kernel requests %d, a quiet read's %d", n, nr.kernelReads, quiet.kernelReads)
	if nr.kernelReads <= quiet.kernelReads {
		t.Errorf("kernel requests %d, a quiet read's %d: want the read repeated after the generation moved", nr.kernelReads, quiet.kernelReads)
	}
	for _, w := range got.Warnings {
		if strings.Contains(w, "kept changing") {
			t.Errorf("warning %q: the retries did not outlast the commits", w)
		}
	}
	if !reflect.DeepEqual(got.Frontends, want.Frontends) {
		t.Errorf("read during commits: %d frontends, a quiet read's %d", len(got.Frontends), len(want.Frontends))
	}
}
