// Package vmtest boots Debian's packaged kernel (linux-image-amd64, 6.1 on
// bookworm) in qemu and runs static Go test binaries inside it, so tests can
// use kernel features the host lacks (IPVS, dummy links, an older kernel's
// BPF) without touching the host's datapath.
//
// The first run downloads the kernel package into .cache/vm (see
// vm/fetch-kernel.sh); each run builds an initramfs with busybox, the
// kernel's network modules, networking tools (ipvsadm, iptables, nft, ip,
// ipset, ...) with their libraries, and the test binaries. The guest's /init
// mounts proc, sysfs, devtmpfs, debugfs, tracefs, bpffs and cgroup2, loads
// the modules in dependency order, runs every binary with -test.v and
// NETDRIFT_IN_VM=1, and powers off. qemu is killed (by its PID) when the
// guest outlives Config.Timeout.
//
// Use from any package's tests:
//
//	func TestThingInVM(t *testing.T) {
//		if os.Getenv("NETDRIFT_IN_VM") != "" {
//			t.Skip("already inside the VM")
//		}
//		bin := vmtest.BuildTest(t, ".") // CGO_ENABLED=0 go test -c
//		res, err := vmtest.Run(t, vmtest.Config{
//			TestBinaries: map[string]string{"thing": bin},
//			Args:         []string{"-test.run=^TestLiveThing$"},
//			Files:        map[string]string{"/work/thing/testdata": "testdata"},
//		})
//		if err != nil {
//			t.Fatal(err)
//		}
//		res.RequirePass(t, "thing", "TestLiveThing")
//	}
//
// and guard TestLiveThing with NETDRIFT_IN_VM=1. Each binary runs in
// /work/NAME, so relative testdata paths work when Files puts them there.
package vmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Config says what to run in the guest. Zero values mean the defaults.
type Config struct {
	// TestBinaries maps a name to a host path of a static test binary
	// (BuildTest makes one). Each runs as /tests/NAME -test.v ARGS... in
	// /work/NAME, in name order.
	TestBinaries map[string]string
	// Args are appended to every binary's command line (e.g. "-test.run=^TestX$").
	Args []string
	// Env adds KEY=VALUE to every binary's environment (NETDRIFT_IN_VM=1 is always set).
	Env []string
	// Files maps a guest path to a host file or directory copied there
	// (e.g. "/work/NAME/testdata": "testdata").
	Files map[string]string
	// Tools are host programs copied with their libraries (default DefaultTools).
	Tools []string
	// ExtraTools are added to Tools.
	ExtraTools []string
	// Modules are loaded at boot (default DefaultModules); ExtraModules are added.
	Modules, ExtraModules []string
	// Network adds a virtio NIC (user-mode: guest 10.0.2.15, host 10.0.2.2).
	Network bool
	// MemoryMiB (default 1024), CPUs (default 2).
	MemoryMiB, CPUs int
	// Timeout for the whole guest run (default 5 minutes); qemu is killed after it.
	Timeout time.Duration
	// Accel is "kvm", "tcg" or "" (auto: $NETDRIFT_VM_ACCEL, else KVM when
	// /dev/kvm opens, falling back to TCG if the KVM guest does not boot).
	Accel string
	// CacheDir holds the kernel download (default <module root>/.cache/vm).
	CacheDir string
}

// Run boots the guest and runs the configured binaries. It skips t (with the
// reason) only under -short, when not root, when qemu or a static busybox
// is not installed (SkipUnlessReady), or when the kernel package cannot be
// had. The error reports a guest that did not finish;
// per-test outcomes are in the Result (see RequirePass).
func Run(t testing.TB, cfg Config) (*Result, error) {
	t.Helper()
	SkipUnlessReady(t)
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	cfg = withDefaults(cfg)
	wd, _ := os.Getwd()
	root, err := repoRoot(wd)
	if err != nil {
		return nil, err
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(root, ".cache/vm")
	}
	kdir, version, err := fetchKernel(root, cfg.CacheDir, t.Logf)
	if errors.Is(err, errUnavailable) {
		t.Skipf("vmtest: %v", err)
	}
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	im := image{
		kernelDir: kdir, version: version, tools: cfg.Tools, binaries: cfg.TestBinaries,
		files: cfg.Files, logf: t.Logf,
	}
	if im.plan, err = plan(kdir, version, cfg); err != nil {
		return nil, err
	}
	initrd := filepath.Join(dir, "initramfs.cpio")
	if err := im.build(initrd, cfg.CacheDir); err != nil {
		return nil, fmt.Errorf("vmtest: initramfs: %w", err)
	}
	if keep := os.Getenv("NETDRIFT_VM_KEEP"); keep != "" { // debugging: keep the logs and initramfs
		dir = keep
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Rename(initrd, filepath.Join(dir, "initramfs.cpio")); err != nil {
			return nil, err
		}
		initrd = filepath.Join(dir, "initramfs.cpio")
		t.Logf("vmtest: keeping initramfs and logs in %s", dir)
	}
	if st, err := os.Stat(initrd); err == nil {
		t.Logf("vmtest: kernel %s, initramfs %.1f MiB built in %s", version, float64(st.Size())/(1<<20), time.Since(start).Round(time.Millisecond))
	}
	q := qemuRun{
		bin: qemu, kernel: kernelImage(kdir), initrd: initrd, memoryMiB: cfg.MemoryMiB,
		cpus: cfg.CPUs, network: cfg.Network, dir: dir, verbose: os.Getenv("NETDRIFT_VM_VERBOSE") == "1",
	}
	res, err := boot(t, q, cfg)
	t.Logf("vmtest: whole run took %s", time.Since(start).Round(time.Millisecond))
	return res, err
}

// kernelImage prefers the uncompressed ELF kernel (booted through its PVH
// entry: no BIOS, no decompression under emulation) over the bzImage.
func kernelImage(kdir string) string {
	if _, err := os.Stat(filepath.Join(kdir, "vmlinux")); err == nil {
		return filepath.Join(kdir, "vmlinux")
	}
	return filepath.Join(kdir, "vmlinuz")
}

func withDefaults(cfg Config) Config {
	if cfg.Tools == nil {
		cfg.Tools = DefaultTools
	}
	cfg.Tools = append(append([]string(nil), cfg.Tools...), cfg.ExtraTools...)
	if cfg.Modules == nil {
		cfg.Modules = DefaultModules
	}
	cfg.Modules = append(append([]string(nil), cfg.Modules...), cfg.ExtraModules...)
	if cfg.Network {
		cfg.Modules = append(cfg.Modules, networkModules...)
	}
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = 1024
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 2
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.Accel == "" {
		cfg.Accel = os.Getenv("NETDRIFT_VM_ACCEL")
	}
	return cfg
}

// plan resolves the module load order and the binaries to run.
func plan(kdir, version string, cfg Config) (initPlan, error) {
	dep, err := os.ReadFile(filepath.Join(kdir, "root/lib/modules", version, "modules.dep"))
	if err != nil {
		return initPlan{}, err
	}
	md, err := parseModulesDep(dep)
	if err != nil {
		return initPlan{}, err
	}
	order, _ := md.loadOrder(cfg.Modules) // unknown names are built in
	return initPlan{
		KernelVersion: version, Modules: order, Network: cfg.Network,
		Binaries: sortedKeys(cfg.TestBinaries), Args: cfg.Args, Env: cfg.Env,
	}, nil
}

// kvmBootDeadline: a KVM guest reaches init in seconds; one that has not
// after this is stuck (as nested KVM is on some hosts) and TCG is tried.
const kvmBootDeadline = 30 * time.Second

// boot runs qemu with the chosen accelerator. In auto mode it tries KVM
// first unless an earlier run recorded that KVM does not work on this host
// (cache file kvm-broken), and falls back to TCG.
func boot(t testing.TB, q qemuRun, cfg Config) (*Result, error) {
	accels := []string{cfg.Accel}
	memo := filepath.Join(cfg.CacheDir, "kvm-broken")
	if cfg.Accel == "" {
		accels = []string{"tcg"}
		if _, err := os.Stat(memo); err != nil && kvmUsable() {
			accels = []string{"kvm", "tcg"}
		}
	}
	for i, accel := range accels {
		q.accel = accel
		deadline := time.Duration(0)
		if accel == "kvm" && i+1 < len(accels) {
			deadline = kvmBootDeadline
		}
		res, stderr, err := bootOnce(t, q, cfg.Timeout, deadline)
		if errors.Is(err, errNoBoot) && i+1 < len(accels) {
			t.Logf("vmtest: %s guest did not boot (%v; %s); using %s from now on (remove %s to retry)",
				accel, err, strings.TrimSpace(lastLines(stderr, 2)), accels[i+1], memo)
			_ = os.WriteFile(memo, []byte(stderr), 0o644)
			continue
		}
		if err == nil && !res.Done {
			err = errors.New("guest stopped before running every binary")
		}
		if err != nil {
			err = fmt.Errorf("vmtest: %w\nqemu stderr:\n%s\nconsole (last lines):\n%s", err, lastLines(stderr, 20), lastLines(res.Console, 40))
		}
		return res, err
	}
	return nil, errors.New("vmtest: no accelerator to try")
}

func bootOnce(t testing.TB, q qemuRun, timeout, bootDeadline time.Duration) (*Result, string, error) {
	os.Remove(filepath.Join(q.dir, "out.log"))
	os.Remove(filepath.Join(q.dir, "console.log"))
	began := time.Now()
	stderr, err := q.run(context.Background(), timeout, bootDeadline)
	res := parseOutput(readLog(q.dir, "out.log"))
	res.Console = readLog(q.dir, "console.log")
	t.Logf("vmtest: qemu (%s) ran %s; guest init started at %.2fs uptime, tests done at %.2fs",
		q.accel, time.Since(began).Round(time.Millisecond), res.BootSeconds, res.DoneSeconds)
	if q.verbose {
		t.Logf("vmtest: console:\n%s", res.Console)
	}
	if len(res.ModuleFailures) > 0 {
		t.Logf("vmtest: modules that did not load: %s", strings.Join(res.ModuleFailures, " "))
	}
	return res, stderr, err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// RequirePass fails t unless binary name exited 0 and each named test
// passed in it (a SKIP is a failure: the guest has every feature). With no
// test names, it requires at least one passing test.
func (r *Result) RequirePass(t testing.TB, name string, tests ...string) {
	t.Helper()
	b, ok := r.Binaries[name]
	if !ok {
		t.Fatalf("vmtest: binary %s did not run; results port:\n%s", name, lastLines(r.Output, 60))
	}
	t.Logf("vmtest: %s output:\n%s", name, b.Output)
	if b.ExitCode != 0 {
		t.Errorf("vmtest: %s exited %d", name, b.ExitCode)
	}
	if len(tests) == 0 {
		n := 0
		for _, s := range b.Tests {
			if s == "PASS" {
				n++
			}
		}
		if n == 0 {
			t.Errorf("vmtest: %s: no test passed", name)
		}
	}
	for _, tn := range tests {
		if got := b.Tests[tn]; got != "PASS" {
			t.Errorf("vmtest: %s: test %s: %q, want PASS", name, tn, got)
		}
	}
}

// BuildTest compiles the test binary of a package (a directory, e.g. "." or
// "./internal/ipvs") statically (CGO_ENABLED=0 go test -c) into a temp dir
// and returns its path.
func BuildTest(t testing.TB, pkg string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(t.TempDir(), filepath.Base(filepath.Clean(pkg))+".test")
	cmd := exec.Command(goBin, "test", "-c", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("vmtest: go test -c %s: %v\n%s", pkg, err, b)
	}
	return out
}

// RunOwnTests runs tests of the calling package (its test binary, built
// from ".", named name in the guest) inside the VM and requires each to
// pass; cfg adds files and a timeout. It skips when already in the VM.
func RunOwnTests(t *testing.T, name string, tests []string, cfg Config) {
	t.Helper()
	if os.Getenv("NETDRIFT_IN_VM") != "" {
		t.Skip("already inside the VM")
	}
	SkipUnlessReady(t)
	cfg.TestBinaries = map[string]string{name: BuildTest(t, ".")}
	cfg.Args = []string{"-test.run=^(" + strings.Join(tests, "|") + ")$", "-test.count=1"}
	res, err := Run(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res.RequirePass(t, name, tests...)
}
