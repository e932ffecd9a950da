package vmtest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// DefaultTools are host programs copied into the guest with their shared
// libraries; missing ones are skipped (logged).
var DefaultTools = []string{
	"ipvsadm", "ipset", "nft", "ip", "ss", "tc", "conntrack", "bpftool",
	"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore",
	"iptables-legacy", "iptables-legacy-save", "iptables-legacy-restore",
	"ip6tables-legacy", "ip6tables-legacy-save", "ip6tables-legacy-restore",
}

// DefaultModules are loaded (with their dependencies, in modules.dep order)
// at boot. Names missing from modules.dep are built in or absent: ignored.
var DefaultModules = []string{
	"crc32c_generic", "libcrc32c", "dummy", "veth",
	"nfnetlink", "nf_conntrack", "nf_conntrack_netlink", "nf_nat", "nf_tables", "nft_compat",
	"nft_chain_nat", "nft_ct", "nft_nat", "nft_masq", "nft_numgen", "nft_reject_inet",
	"nft_reject_ipv4", "nft_reject_ipv6", "nft_fib_inet", "nft_fib_ipv4", "nft_fib_ipv6", "nft_limit",
	"x_tables", "ip_tables", "ip6_tables", "iptable_nat", "iptable_filter", "iptable_mangle",
	"iptable_raw", "ip6table_nat", "ip6table_filter", "ip6table_mangle", "ip6table_raw",
	"xt_comment", "xt_mark", "xt_conntrack", "xt_MASQUERADE", "xt_nat", "xt_addrtype",
	"xt_statistic", "xt_multiport", "xt_tcpudp", "xt_REDIRECT", "xt_set", "xt_recent",
	"ipt_REJECT", "ip6t_REJECT", "ip_set", "ip_set_hash_ip", "ip_set_hash_ipport",
	"ip_set_hash_ipportip", "ip_set_hash_ipportnet", "ip_set_hash_net", "ip_set_bitmap_port",
	"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "ip_vs_lc", "inet_diag", "tcp_diag", "udp_diag",
}

// networkModules drive the guest's virtio NIC (Config.Network).
var networkModules = []string{"virtio_pci", "virtio_net"}

// moduleDirs are copied whole (plus dependencies) so the guest's modprobe
// can load more on demand (iptables -m, nft expressions).
var moduleDirs = []string{
	"kernel/net/netfilter", "kernel/net/ipv4", "kernel/net/ipv6", "kernel/net/sched",
	"kernel/net/sctp", "kernel/net/bridge", "kernel/net/core", "kernel/net/8021q",
	"kernel/crypto", "kernel/lib", "kernel/drivers/virtio",
}

var moduleFiles = []string{
	"kernel/drivers/net/dummy.ko", "kernel/drivers/net/veth.ko", "kernel/drivers/net/virtio_net.ko",
	"kernel/drivers/net/net_failover.ko", "kernel/drivers/net/macvlan.ko", "kernel/drivers/net/ipvlan/ipvlan.ko",
	"kernel/drivers/net/vxlan/vxlan.ko",
}

// hostFiles are copied when present: name databases tools need.
var hostFiles = []string{"/etc/protocols", "/etc/services", "/etc/ethertypes", "/etc/netconfig"}

// image describes the initramfs contents.
type image struct {
	kernelDir string // the fetched kernel: root/lib/modules/VERSION
	version   string
	plan      initPlan
	tools     []string
	binaries  map[string]string // name -> host path
	files     map[string]string // guest path -> host path (file or directory)
	logf      func(string, ...any)
}

// build writes the initramfs to dst: the base archive (busybox, modules,
// tools and their libraries; cached in cacheDir, keyed by what it holds)
// followed by a second archive with this run's binaries, files and /init.
// The kernel unpacks concatenated archives in order.
func (im *image) build(dst, cacheDir string) error {
	base, err := im.base(cacheDir)
	if err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	in, err := os.Open(base)
	if err != nil {
		out.Close()
		return err
	}
	_, err = io.Copy(out, in)
	in.Close()
	if err == nil {
		err = im.writeArchive(out, im.addRun)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// base returns the cached base archive, building it when missing.
func (im *image) base(cacheDir string) (string, error) {
	path := filepath.Join(cacheDir, "initramfs-base-"+im.baseKey()+".cpio")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	tmp, err := os.CreateTemp(cacheDir, "initramfs-base-*.tmp")
	if err != nil {
		return "", err
	}
	err = im.writeArchive(tmp, im.addBase)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	im.logf("vmtest: built base initramfs %s", path)
	return path, nil
}

// baseKey hashes what the base archive holds: kernel version, module
// list, tool names and the size and mtime of each host program.
func (im *image) baseKey() string {
	h := sha256.New()
	fmt.Fprintln(h, "v1", im.version, im.plan.Modules, im.tools, hostFiles)
	for _, t := range append([]string{"busybox"}, im.tools...) {
		if p, err := exec.LookPath(t); err == nil {
			if st, err := os.Stat(p); err == nil {
				fmt.Fprintln(h, t, p, st.Size(), st.ModTime().UnixNano())
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (im *image) writeArchive(w io.Writer, fill func(*cpioWriter) error) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	c := newCPIO(bw)
	if err := fill(c); err != nil {
		return err
	}
	if err := c.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func (im *image) addBase(c *cpioWriter) error {
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", "root", "etc", "tests", "work", "mnt"} {
		c.Dir(d, 0o755)
	}
	c.Symlink("var/run", "/run")
	if err := im.addBusybox(c); err != nil {
		return err
	}
	if err := im.addModules(c); err != nil {
		return err
	}
	im.addTools(c)
	for _, h := range hostFiles {
		if _, err := os.Stat(h); err == nil {
			c.File(h, h)
		}
	}
	c.Bytes("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	c.Bytes("etc/group", 0o644, []byte("root:x:0:\n"))
	c.Bytes("etc/hostname", 0o644, []byte("netdrift-vm\n"))
	return nil
}

func (im *image) addRun(c *cpioWriter) error {
	for _, name := range sortedKeys(im.binaries) {
		c.File("tests/"+name, im.binaries[name])
	}
	for _, g := range sortedKeys(im.files) {
		if err := addTree(c, g, im.files[g]); err != nil {
			return err
		}
	}
	c.Bytes("init", 0o755, []byte(initScript(im.plan)))
	return nil
}

func (im *image) addBusybox(c *cpioWriter) error {
	bb, err := staticBusybox()
	if err != nil {
		return err
	}
	c.File("bin/busybox", bb)
	list, err := exec.Command(bb, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	c.Symlink("bin/sh", "busybox")
	for _, applet := range strings.Fields(string(list)) {
		c.Symlink("bin/"+applet, "busybox")
	}
	// The kernel runs /sbin/modprobe for on-demand modules (crc32c, nft
	// expressions, xt matches).
	for _, a := range []string{"modprobe", "insmod", "rmmod", "lsmod", "depmod"} {
		c.Symlink("sbin/"+a, "/bin/busybox")
	}
	return nil
}

func (im *image) addModules(c *cpioWriter) error {
	base := filepath.Join(im.kernelDir, "root/lib/modules", im.version)
	dep, err := os.ReadFile(filepath.Join(base, "modules.dep"))
	if err != nil {
		return fmt.Errorf("kernel cache incomplete: %w", err)
	}
	md, err := parseModulesDep(dep)
	if err != nil {
		return err
	}
	want := append(md.under(moduleDirs), moduleFiles...)
	for _, p := range append(md.closure(want), im.plan.Modules...) {
		if _, ok := md.deps[p]; ok {
			c.File("lib/modules/"+im.version+"/"+p, filepath.Join(base, p))
		}
	}
	for _, meta := range []string{"modules.dep", "modules.alias", "modules.symbols", "modules.builtin", "modules.order", "modules.softdep"} {
		if _, err := os.Stat(filepath.Join(base, meta)); err == nil {
			c.File("lib/modules/"+im.version+"/"+meta, filepath.Join(base, meta))
		}
	}
	return nil
}

// addTools copies host programs, their libraries and the xtables plugins.
func (im *image) addTools(c *cpioWriter) {
	var elfs []string
	for _, t := range im.tools {
		p, err := exec.LookPath(t)
		if err != nil {
			im.logf("vmtest: tool %s not on the host, not in the guest", t)
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		c.File(real, real)
		if real != p {
			c.Symlink(p, real)
		}
		elfs = append(elfs, real)
	}
	if plugins, _ := filepath.Glob("/usr/lib/x86_64-linux-gnu/xtables/*.so"); len(plugins) > 0 {
		for _, p := range plugins {
			c.File(p, p)
		}
		elfs = append(elfs, plugins...)
	}
	for _, lib := range sharedLibs(elfs) {
		if real, err := filepath.EvalSymlinks(lib); err == nil {
			c.File(lib, real)
		}
	}
}

var lddLine = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// sharedLibs lists the libraries (and the loader) the ELF files need, per ldd.
func sharedLibs(elfs []string) []string {
	set := map[string]bool{}
	for _, e := range elfs {
		out, err := exec.Command("ldd", e).Output()
		if err != nil {
			continue // static, or not an ELF
		}
		for _, line := range strings.Split(string(out), "\n") {
			if m := lddLine.FindStringSubmatch(line); m != nil {
				set[m[1]] = true
			}
		}
	}
	return sortedKeys(set)
}

// addTree adds a host file or directory at guest path g.
func addTree(c *cpioWriter, g, host string) error {
	st, err := os.Stat(host)
	if err != nil {
		return fmt.Errorf("vmtest: extra file: %w", err)
	}
	if !st.IsDir() {
		c.File(g, host)
		return nil
	}
	return filepath.Walk(host, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(host, p)
		target := filepath.Join(g, rel)
		switch {
		case info.IsDir():
			c.Dir(target, 0o755)
		case info.Mode().IsRegular():
			c.File(target, p)
		}
		return nil
	})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
