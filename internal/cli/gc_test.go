package cli

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func gcSettings() (percent int, limit int64) {
	percent = debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1)
}

func TestOfflineGCPolicy(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	dir := t.TempDir()
	a, b := filepath.Join(dir, "cluster.json"), filepath.Join(dir, "dump")
	if err := os.WriteFile(a, make([]byte, 3000), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, make([]byte, 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	p0, l0 := gcSettings()

	restore := offlineGC(a, b, "", filepath.Join(dir, "missing"))
	if p, l := gcSettings(); p != -1 || l != offlineHeapBase+offlineHeapPerByte*4000 {
		t.Errorf("files of 4,000 bytes: GOGC %d, limit %d; want off and %d", p, l, offlineHeapBase+offlineHeapPerByte*4000)
	}
	restore()
	if p, l := gcSettings(); p != p0 || l != l0 {
		t.Errorf("not restored: GOGC %d limit %d, was %d %d", p, l, p0, l0)
	}

	restore = offlineGC() // a live read: input of unknown size
	if p, l := gcSettings(); p != offlineGCPercent || l != l0 {
		t.Errorf("no files: GOGC %d limit %d, want %d and the limit unchanged", p, l, offlineGCPercent)
	}
	restore()

	gz := filepath.Join(dir, "dump.gz")
	if err := os.WriteFile(gz, []byte{0x1f, 0x8b, 8, 0}, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, unknown := range []string{"-", gz} { // standard input, gzip: size unknown before reading
		restore = offlineGC(a, unknown)
		if p, l := gcSettings(); p != offlineGCPercent || l != l0 {
			t.Errorf("%s: GOGC %d limit %d, want %d and the limit unchanged", unknown, p, l, offlineGCPercent)
		}
		restore()
	}

	t.Setenv("GOGC", "150") // the user's setting wins (the runtime read it at start)
	restore = offlineGC(a, b)
	if p, l := gcSettings(); p != p0 || l != l0 {
		t.Errorf("GOGC set: GOGC %d limit %d changed", p, l)
	}
	restore()
}
