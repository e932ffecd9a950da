package bench

import (
	"bytes"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// cpuNow is this process's user+system CPU time (who=RUSAGE_SELF) or that
// of its waited-for children (RUSAGE_CHILDREN).
func cpuNow(who int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// selfCPU runs fn and returns the CPU time this process and its children
// spent on it, including the garbage collection of what fn allocated (a GC
// is forced inside the window). The benchmarks run one thing at a time, so
// the process-wide counters belong to fn.
func selfCPU(fn func()) time.Duration {
	runtime.GC()
	s0, c0 := cpuNow(syscall.RUSAGE_SELF), cpuNow(syscall.RUSAGE_CHILDREN)
	fn()
	runtime.GC()
	return cpuNow(syscall.RUSAGE_SELF) - s0 + cpuNow(syscall.RUSAGE_CHILDREN) - c0
}

// run executes a command (in netns ns when set) with stdin and returns its
// stdout and the CPU time the command itself used (from its rusage).
func run(tb testing.TB, ns string, stdin string, name string, args ...string) ([]byte, time.Duration) {
	tb.Helper()
	cmd := exec.Command(name, args...)
	if ns != "" {
		cmd = netnstest.Cmd(ns, append([]string{name}, args...)...)
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s: %v: %s", strings.Join(cmd.Args, " "), err, errb.String())
	}
	return out.Bytes(), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// netns creates a fresh network namespace, removed when the test ends.
func netns(tb testing.TB) string {
	tb.Helper()
	netnstest.RequireRoot(tb, "loads generated tables into a fresh network namespace")
	return netnstest.New(tb, "nd-bench")
}

// ms converts a total CPU time over n operations to milliseconds per op.
func ms(d time.Duration, n int) float64 { return float64(d) / float64(n) / 1e6 }
