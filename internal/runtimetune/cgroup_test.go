package runtimetune

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name, file, text string
		want             int64
		ok, err          bool
	}{
		{"v2 limit", "memory.max", "1073741824\n", 1 << 30, true, false},
		{"v2 no limit", "memory.max", "max\n", 0, false, false},
		{"v1 limit", "memory/memory.limit_in_bytes", "536870912\n", 512 << 20, true, false},
		{"v1 no limit", "memory/memory.limit_in_bytes", "9223372036854771712\n", 0, false, false},
		{"garbage", "memory.max", "lots\n", 0, false, true},
		{"no file", "other", "1\n", 0, false, false},
	} {
		dir := t.TempDir()
		writeFile(t, dir, c.file, c.text)
		got, ok, err := CgroupMemoryLimit(dir)
		if got != c.want || ok != c.ok || (err != nil) != c.err {
			t.Errorf("%s: got %d, %v, %v; want %d, %v, error %v", c.name, got, ok, err, c.want, c.ok, c.err)
		}
	}
}

// env is a fake environment for Agent.
func env(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

func restoreRuntime(t *testing.T) {
	pct, lim := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	debug.SetGCPercent(pct)
	t.Cleanup(func() { debug.SetGCPercent(pct); debug.SetMemoryLimit(lim) })
}

// TestAgentPolicyCgroupAndTuner: with nothing in the environment the
// cgroup's limit is set and the tuner started (in a child process: the
// tuner runs for the rest of its process).
func TestAgentPolicyCgroupAndTuner(t *testing.T) {
	if !inChild(t) {
		return
	}
	restoreRuntime(t)
	dir := t.TempDir()
	writeFile(t, dir, "memory.max", "805306368\n")
	p, err := Agent(env(nil), dir)
	if err != nil || p.LimitFrom != "cgroup" || p.MemoryLimit != 768<<20 || p.GC != "tuner" {
		t.Fatalf("empty environment: %+v, %v", p, err)
	}
	if got := debug.SetMemoryLimit(-1); got != 768<<20 {
		t.Errorf("runtime memory limit %d, want the cgroup's", got)
	}
	if got := debug.SetGCPercent(-1); got < BasePercent {
		t.Errorf("GC percent %d, want the tuner's (at least its base %d)", got, BasePercent)
	}
}

// TestAgentPolicy: $GOMEMLIMIT and $GOGC set are left alone; an unreadable
// cgroup limit is an error that says what to do.
func TestAgentPolicy(t *testing.T) {
	restoreRuntime(t)
	dir := t.TempDir()
	writeFile(t, dir, "memory.max", "805306368\n")

	// $GOMEMLIMIT and $GOGC win: nothing is changed.
	debug.SetMemoryLimit(math.MaxInt64)
	debug.SetGCPercent(100)
	p, err := Agent(env(map[string]string{"GOMEMLIMIT": "1GiB", "GOGC": "100"}), dir)
	if err != nil || p.LimitFrom != "$GOMEMLIMIT" || p.GC != "$GOGC" || p.MemoryLimit != math.MaxInt64 {
		t.Fatalf("both set: %+v, %v", p, err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent %d with $GOGC set, want it left at 100", got)
	}

	// An unreadable limit is an error that says what to do, and sets none.
	writeFile(t, dir, "memory.max", "lots\n")
	p, err = Agent(env(map[string]string{"GOGC": "100"}), dir)
	if err == nil || p.LimitFrom != "none" || p.MemoryLimit != math.MaxInt64 {
		t.Fatalf("bad memory.max: %+v, %v", p, err)
	}
}
