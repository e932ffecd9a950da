package vmtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestVMBoots boots the Debian kernel and runs this package's own
// TestGuestEnvironment inside it.
func TestVMBoots(t *testing.T) {
	if os.Getenv("NETDRIFT_IN_VM") != "" {
		t.Skip("already inside the VM")
	}
	SkipUnlessReady(t)
	bin := BuildTest(t, ".")
	res, err := Run(t, Config{
		TestBinaries: map[string]string{"vmtest": bin},
		Args:         []string{"-test.run=^TestGuestEnvironment$"},
		Timeout:      4 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	res.RequirePass(t, "vmtest", "TestGuestEnvironment")
}

// TestGuestEnvironment runs inside the VM: it checks what the harness
// promises to other packages' tests.
func TestGuestEnvironment(t *testing.T) {
	if os.Getenv("NETDRIFT_IN_VM") != "1" {
		t.Skip("runs inside the vmtest guest (TestVMBoots)")
	}
	rel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil || !strings.HasPrefix(string(rel), "6.1.") {
		t.Errorf("kernel release %q (%v), want Debian's 6.1", rel, err)
	}
	for _, p := range []string{"/sys/kernel/btf/vmlinux", "/sys/kernel/debug/tracing", "/sys/kernel/tracing/events/tcp", "/proc/net/ip_vs", "/sys/module/nf_tables", "/sys/module/dummy"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%v", err)
		}
	}
	mounts, _ := os.ReadFile("/proc/mounts")
	for _, fs := range []string{" /sys/fs/bpf bpf ", " /sys/kernel/debug debugfs ", " /sys/fs/cgroup cgroup2 ", " /tmp tmpfs "} {
		if !strings.Contains(string(mounts), fs) {
			t.Errorf("not mounted:%q\n%s", fs, mounts)
		}
	}
	ns := "nd-vmtest-guest"
	for _, c := range [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "-n", ns, "link", "add", "kube-ipvs0", "type", "dummy"},
		{"ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1"},
		{"ip", "netns", "exec", ns, "ipvsadm", "-A", "-t", "10.0.0.1:80", "-s", "rr"},
		{"ip", "netns", "exec", ns, "ipvsadm", "-Sn"},
		{"ip", "netns", "exec", ns, "iptables", "-t", "nat", "-A", "POSTROUTING", "-m", "comment", "--comment", "x", "-j", "MASQUERADE"},
		{"ip", "netns", "exec", ns, "iptables-legacy", "-t", "nat", "-N", "KUBE-TEST"},
		{"ip", "netns", "exec", ns, "nft", "add", "table", "ip", "t"},
		{"ip", "netns", "exec", ns, "ipset", "create", "s", "hash:ip,port"},
		{"ip", "netns", "exec", ns, "conntrack", "-L"},
		{"ip", "netns", "del", ns},
	} {
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
}
