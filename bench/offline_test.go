package bench

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/cli"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// BenchmarkOfflineDiff: the dump command a responder runs on the node
// (`iptables-save` with the nft or legacy backend, or `nft -j list table ip
// kube-proxy`), then the real `netdrift diff --cluster FILE --iptables-save
// DUMP` (or --nft-json) binary on exactly that output, as two child
// processes in the same iteration; CPU (user+system) of each from its own
// rusage, so netdrift's process start, the cluster-file load, the parse,
// the desired state and the compare are all in its figure. The dump
// command runs on a thread switched into the namespace (no `ip netns exec`
// wrapper on either side). The cluster file (kubectl-shaped, ClusterFile)
// is written once; every diff must report no findings. The binary is
// $NETDRIFT_BIN, or built from ./cmd/agent as `make build` builds it; with
// $NETDRIFT_BIN_BASE set (an older build), every iteration runs that one
// on the same files too (base-diff-ms, base-diff/dump), for before/after
// figures from one run.
func BenchmarkOfflineDiff(b *testing.B) {
	for _, sc := range scales {
		for _, mode := range []string{"iptables-nft", "iptables-legacy", "nftables"} {
			b.Run(sc.name+"/"+mode, func(b *testing.B) { benchOfflineDiff(b, sc.spec, mode) })
		}
	}
}

func benchOfflineDiff(b *testing.B, s Spec, mode string) {
	var ns string
	dumpArgv, flag := []string{mode + "-save"}, "--iptables-save"
	if mode == "nftables" {
		ns, dumpArgv, flag = loadNFT(b, s), []string{"nft", "-j", "list", "table", "ip", "kube-proxy"}, "--nft-json"
	} else {
		ns = loadIPTables(b, s, strings.TrimPrefix(mode, "iptables-"))
	}
	bin, base := netdriftBinary(b), os.Getenv("NETDRIFT_BIN_BASE")
	dir := b.TempDir()
	cluster, dumpFile := filepath.Join(dir, "cluster.json"), filepath.Join(dir, "dump")
	clusterFile := s.ClusterFile()
	if err := os.WriteFile(cluster, clusterFile, 0o600); err != nil {
		b.Fatal(err)
	}
	keep(b, "cluster.json", clusterFile)
	args := []string{"diff", "--node", NodeName, "--cluster", cluster, flag, dumpFile}
	var dump, diff, baseDiff time.Duration
	var dumpBytes int
	var rss int64
	n := 0
	for b.Loop() {
		out, c := runInNetns(b, ns, dumpArgv...)
		dump, dumpBytes = dump+c, len(out)
		if err := os.WriteFile(dumpFile, out, 0o600); err != nil {
			b.Fatal(err)
		}
		keep(b, mode+".dump", out)
		c, maxrss := runCleanDiff(b, bin, args)
		diff, rss = diff+c, max(rss, maxrss)
		if base != "" {
			c, _ = runCleanDiff(b, base, args)
			baseDiff += c
		}
		n++
	}
	b.ReportMetric(ms(dump, n), "dump-ms")
	b.ReportMetric(ms(diff, n), "diff-ms")
	b.ReportMetric(float64(diff)/float64(dump), "diff/dump")
	if base != "" {
		b.ReportMetric(ms(baseDiff, n), "base-diff-ms")
		b.ReportMetric(float64(baseDiff)/float64(dump), "base-diff/dump")
	}
	b.ReportMetric(float64(dumpBytes)/1e6, "dump-MB")
	b.ReportMetric(float64(len(clusterFile))/1e6, "cluster-MB")
	b.ReportMetric(float64(rss)/1024, "diff-maxrss-MB")
}

// keep writes an input of the diff into $BENCH_OFFLINE_KEEP as name (when
// set), for profiling the diff on exactly these inputs.
func keep(b *testing.B, name string, data []byte) {
	if dir := os.Getenv("BENCH_OFFLINE_KEEP"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// runCleanDiff runs bin with args and fails unless it reports no findings
// and no warnings; it returns the CPU time and peak RSS (kB).
func runCleanDiff(b *testing.B, bin string, args []string) (time.Duration, int64) {
	b.Helper()
	report, cpu, rss := runDiff(b, bin, args...)
	if !strings.HasPrefix(report, "node "+NodeName+"  datapath ") || !strings.Contains(report, "findings 0\n") || strings.Contains(report, "warning:") {
		b.Fatalf("%s diff on a drift-free dump:\n%.2000s", bin, report)
	}
	return cpu, rss
}

// runInNetns runs argv on a thread switched into ns (the child inherits
// the thread's network namespace) and returns its stdout and CPU time.
func runInNetns(tb testing.TB, ns string, argv ...string) ([]byte, time.Duration) {
	tb.Helper()
	var out, errb bytes.Buffer
	var cpu time.Duration
	err := netnstest.DoNamed(ns, func() error {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return err
		}
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		return nil
	})
	if err != nil {
		tb.Fatalf("in netns %s: %s: %v: %s", ns, strings.Join(argv, " "), err, errb.String())
	}
	return out.Bytes(), cpu
}

// runDiff runs the netdrift binary and returns its stdout, CPU time and
// peak RSS (kB); exit status 0 (no findings) or 1 (findings) is expected.
func runDiff(tb testing.TB, bin string, args ...string) (string, time.Duration, int64) {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != cli.ExitFindings {
		tb.Fatalf("%s: %v: %s", strings.Join(cmd.Args, " "), err, errb.String())
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	var rss int64
	if ru != nil {
		rss = ru.Maxrss
	}
	return out.String(), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), rss
}

// netdriftBinary is $NETDRIFT_BIN, or ./cmd/agent built (as `make build`
// builds it) into a temporary directory.
func netdriftBinary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("NETDRIFT_BIN"); p != "" {
		return p
	}
	bin := filepath.Join(tb.TempDir(), "netdrift")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build ./cmd/agent: %v: %s", err, out)
	}
	return bin
}

// BenchmarkOfflineDiffInProcess runs `netdrift diff` through its CLI entry
// point inside the test process (no root: the dump is the generated
// iptables-restore text, which iptables-save prints back in the same form),
// for profiling with -cpuprofile. CPU per diff from rusage, GC included.
func BenchmarkOfflineDiffInProcess(b *testing.B) {
	for _, sc := range scales {
		b.Run(sc.name, func(b *testing.B) {
			dir := b.TempDir()
			cluster, dump := filepath.Join(dir, "cluster.json"), filepath.Join(dir, "dump")
			if err := os.WriteFile(cluster, sc.spec.ClusterFile(), 0o600); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(dump, []byte(sc.spec.IPTablesRestore()), 0o600); err != nil {
				b.Fatal(err)
			}
			var cpu time.Duration
			n := 0
			for b.Loop() {
				var out bytes.Buffer
				cpu += selfCPU(func() {
					code, _ := cli.Run(cli.Env{}, []string{"diff", "--node", NodeName, "--cluster", cluster, "--iptables-save", dump}, &out, io.Discard)
					if code != cli.ExitOK {
						b.Fatalf("exit %d:\n%.2000s", code, out.String())
					}
				})
				n++
			}
			b.ReportMetric(ms(cpu, n), "diff-ms")
		})
	}
}
