package vmtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readCPIO decodes a newc archive into name -> (mode, content).
func readCPIO(t *testing.T, b []byte) map[string]struct {
	mode uint32
	data string
} {
	t.Helper()
	out := map[string]struct {
		mode uint32
		data string
	}{}
	for off := 0; ; {
		if len(b)-off < 110 || string(b[off:off+6]) != "070701" {
			t.Fatalf("bad header at %d", off)
		}
		field := func(i int) int {
			v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return int(v)
		}
		mode, size, nameLen := uint32(field(1)), field(6), field(11)
		name := string(b[off+110 : off+110+nameLen-1])
		off += (110 + nameLen + 3) &^ 3
		data := string(b[off : off+size])
		off += (size + 3) &^ 3
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after trailer", len(b)-off)
			}
			return out
		}
		out[name] = struct {
			mode uint32
			data string
		}{mode, data}
	}
}

func TestCPIO(t *testing.T) {
	var buf bytes.Buffer
	c := newCPIO(&buf)
	c.Bytes("/a/b/file", 0o644, []byte("hello"))
	c.Bytes("a/b/file", 0o644, []byte("second write is skipped"))
	c.Symlink("bin/sh", "busybox")
	c.Dir("empty", 0o700)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	bad := newCPIO(&bytes.Buffer{})
	bad.File("x", "/nonexistent-host-file")
	if err := bad.Close(); err == nil {
		t.Error("missing host file: no error")
	}
	got := readCPIO(t, buf.Bytes())
	want := map[string]uint32{"a": modeDir | 0o755, "a/b": modeDir | 0o755, "a/b/file": modeFile | 0o644,
		"bin": modeDir | 0o755, "bin/sh": modeLink | 0o777, "empty": modeDir | 0o700}
	if len(got) != len(want) {
		t.Errorf("entries %v", got)
	}
	for n, m := range want {
		if got[n].mode != m {
			t.Errorf("%s: mode %o, want %o", n, got[n].mode, m)
		}
	}
	if got["a/b/file"].data != "hello" || got["bin/sh"].data != "busybox" {
		t.Errorf("contents %v", got)
	}
	if _, err := exec.LookPath("cpio"); err == nil { // the real tool agrees
		cmd := exec.Command("cpio", "-t", "--quiet")
		cmd.Stdin = bytes.NewReader(buf.Bytes())
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "a/b/file") {
			t.Errorf("cpio -t: %v %s", err, out)
		}
	}
}

const depFixture = `kernel/net/netfilter/ipvs/ip_vs_rr.ko: kernel/net/netfilter/ipvs/ip_vs.ko kernel/net/netfilter/nf_conntrack.ko kernel/net/ipv6/netfilter/nf_defrag_ipv6.ko kernel/net/ipv4/netfilter/nf_defrag_ipv4.ko kernel/lib/libcrc32c.ko
kernel/net/netfilter/ipvs/ip_vs.ko: kernel/net/netfilter/nf_conntrack.ko kernel/net/ipv6/netfilter/nf_defrag_ipv6.ko kernel/net/ipv4/netfilter/nf_defrag_ipv4.ko kernel/lib/libcrc32c.ko
kernel/net/netfilter/nf_conntrack.ko: kernel/net/ipv6/netfilter/nf_defrag_ipv6.ko kernel/net/ipv4/netfilter/nf_defrag_ipv4.ko kernel/lib/libcrc32c.ko
kernel/net/ipv6/netfilter/nf_defrag_ipv6.ko:
kernel/net/ipv4/netfilter/nf_defrag_ipv4.ko:
kernel/lib/libcrc32c.ko:
kernel/crypto/crc32c_generic.ko:
kernel/drivers/net/dummy.ko:
kernel/arch/x86/crypto/crc32c-intel.ko:
`

func TestModuleOrder(t *testing.T) {
	md, err := parseModulesDep([]byte(depFixture))
	if err != nil {
		t.Fatal(err)
	}
	order, unknown := md.loadOrder([]string{"crc32c_generic", "ip_vs_rr", "ip_vs", "crc32c-intel", "tcp_bbr_builtin"})
	pos := map[string]int{}
	for i, p := range order {
		pos[modName(p)] = i
	}
	if len(order) != 8 || len(unknown) != 1 || unknown[0] != "tcp_bbr_builtin" {
		t.Fatalf("order %v unknown %v", order, unknown)
	}
	for _, before := range [][2]string{
		{"libcrc32c", "nf_conntrack"}, {"nf_defrag_ipv4", "nf_conntrack"}, {"nf_conntrack", "ip_vs"},
		{"ip_vs", "ip_vs_rr"}, {"crc32c_generic", "libcrc32c"},
	} {
		if pos[before[0]] >= pos[before[1]] {
			t.Errorf("%s must load before %s: %v", before[0], before[1], order)
		}
	}
	if _, ok := pos["crc32c_intel"]; !ok {
		t.Error("dash in module name not normalised")
	}
	if got := md.closure([]string{"kernel/net/netfilter/ipvs/ip_vs.ko"}); len(got) != 5 {
		t.Errorf("closure %v", got)
	}
	if got := md.under([]string{"kernel/net/ipv4/"}); len(got) != 1 {
		t.Errorf("under %v", got)
	}
	if _, err := parseModulesDep([]byte("kernel/a.ko\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad modules.dep: err %v", err)
	}
}

func TestInitScript(t *testing.T) {
	s := initScript(initPlan{
		KernelVersion: "6.1.0-57-amd64",
		Modules:       []string{"kernel/lib/libcrc32c.ko", "kernel/net/netfilter/nf_conntrack.ko"},
		Network:       true,
		Binaries:      []string{"ipvs", "rst"},
		Args:          []string{"-test.run=^TestLive$", "it's"},
		Env:           []string{"B=2", "A=x y"},
	})
	for _, want := range []string{
		"mount -t bpf bpf /sys/fs/bpf", "mount -t debugfs debugfs /sys/kernel/debug", "mount -t tracefs",
		"mount -t sysfs sysfs /sys", "cd /lib/modules/6.1.0-57-amd64",
		"insmod kernel/lib/libcrc32c.ko 2>/dev/null || say module-failed libcrc32c",
		"ip addr add 10.0.2.15/24 dev eth0",
		"env 'A=x y' B=2 NETDRIFT_IN_VM=1 /tests/ipvs -test.v '-test.run=^TestLive$' 'it'\\''s' >$out 2>&1 </dev/null",
		"say END rst $?", "poweroff -f",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("init script lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, "libcrc32c.ko") > strings.Index(s, "nf_conntrack.ko") {
		t.Error("module order not kept")
	}
	if out, err := exec.Command("sh", "-n", "-c", s).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v %s", err, out)
	}
}

func TestParseOutput(t *testing.T) {
	out := "@@VMTEST module-failed nft_foo\r\n@@VMTEST booted 12.50\r\n@@VMTEST BEGIN ipvs\r\n" +
		"=== RUN   TestA\r\n--- PASS: TestA (0.10s)\r\n=== RUN   TestB\r\n=== RUN   TestB/sub\r\n" +
		"    --- SKIP: TestB/sub (0.00s)\r\n--- FAIL: TestB (1.00s)\r\nFAIL\r\n@@VMTEST END ipvs 1\r\n" +
		"@@VMTEST BEGIN rst\r\n=== RUN   TestC\r\n"
	r := parseOutput(out)
	if r.BootSeconds != 12.5 || r.Done || len(r.ModuleFailures) != 1 {
		t.Errorf("result %+v", r)
	}
	ipvs := r.Binaries["ipvs"]
	if ipvs == nil || ipvs.ExitCode != 1 || ipvs.Tests["TestA"] != "PASS" || ipvs.Tests["TestB"] != "FAIL" || ipvs.Tests["TestB/sub"] != "SKIP" {
		t.Errorf("ipvs %+v", ipvs)
	}
	if rst := r.Binaries["rst"]; rst == nil || rst.ExitCode != -1 || !strings.Contains(rst.Output, "TestC") {
		t.Errorf("unfinished binary %+v", rst)
	}
	r = parseOutput(out + "@@VMTEST END rst 0\n@@VMTEST DONE 30.1\n")
	if !r.Done || r.DoneSeconds != 30.1 || r.Binaries["rst"].ExitCode != 0 {
		t.Errorf("done %+v", r)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"": "''", "a-b=c/d": "a-b=c/d", "a b": "'a b'", "it's": `'it'\''s'`, "$x": "'$x'"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestQemuArgs(t *testing.T) {
	q := qemuRun{bin: "qemu", kernel: "k", initrd: "i", memoryMiB: 512, cpus: 2, accel: "tcg", dir: "/d", network: true}
	a := strings.Join(q.args(), " ")
	for _, want := range []string{"-no-reboot", "-m 512", "-accel tcg,thread=multi", "-serial file:/d/console.log -serial file:/d/out.log", "virtio-net-pci", "panic=-1 rdinit=/init", " quiet"} {
		if !strings.Contains(a, want) {
			t.Errorf("qemu args lack %q: %s", want, a)
		}
	}
}

// TestShortSkipsBeforeAnyDownload: under -short the VM test skips, saying
// why, before it builds or fetches anything (no kernel cache appears).
func TestShortSkipsBeforeAnyDownload(t *testing.T) {
	if os.Getenv("NETDRIFT_IN_VM") != "" {
		t.Skip("inside the VM")
	}
	wd, _ := os.Getwd()
	root, err := repoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(root, ".cache/vm")
	_, statErr := os.Stat(cache)
	out, err := exec.Command(os.Args[0], "-test.run=^TestVMBoots$", "-test.short", "-test.v", "-test.count=1").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- SKIP: TestVMBoots") || !strings.Contains(string(out), "-short skips the VM tests") {
		t.Fatalf("TestVMBoots under -short did not skip with the reason:\n%s", out)
	}
	if _, err := os.Stat(cache); os.IsNotExist(statErr) && err == nil {
		t.Errorf("%s appeared under -short", cache)
	}
}
