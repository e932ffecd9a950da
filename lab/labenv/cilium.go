package labenv

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Cilium mode (Options.ProxyMode "cilium"): no kube-proxy. Each node runs
// cilium-lb, Cilium's own load-balancer control plane (lab/cilium, built
// from github.com/cilium/cilium), which writes the real service maps into
// a bpf filesystem of the node's own: bpf maps are not per network
// namespace, so each node's maps live in their own bpffs instance, mounted
// by the lab at NodeBPFFS(node) in the host's mount namespace (visible to
// the node's processes, which `ip netns exec` starts in a copy of it).
// The lab's process slot "kube-proxy/<node>" holds cilium-lb, so freezing
// or stopping "kube-proxy" freezes or stops the node's service proxy.

// CiliumBinaries are built by `make lab-cilium-bins` (module lab/cilium);
// cilium-lb-1.19.1 (Options.CiliumLB) by `make lab-cilium119-bin` (module
// lab/cilium119).
var CiliumBinaries = []string{"cilium-lb", "cilium-dbg"}

// NodeBPFFS is the bpf filesystem holding node's Cilium service maps.
func (l *Lab) NodeBPFFS(node string) (string, error) {
	i, err := l.index(node)
	if err != nil {
		return "", err
	}
	return l.nodeBPFFS(i), nil
}

func (l *Lab) nodeBPFFS(i int) string { return filepath.Join(l.opts.Dir, "bpf", nodeName(i)) }

// mountNodeBPFFS mounts node i's bpffs unless it is mounted already.
func (l *Lab) mountNodeBPFFS(i int) error {
	dir := l.nodeBPFFS(i)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=700"); err != nil {
		return fmt.Errorf("mount bpffs at %s: %w", dir, err)
	}
	return nil
}

func checkCiliumBinaries(binDir, lb string) error {
	for _, b := range append(CiliumBinaries, lb) {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("cilium mode needs %s in %s: run `make lab-cilium-bins` (`make lab-cilium119-bin` for cilium-lb-1.19.1)", b, binDir)
		}
	}
	return nil
}

// ciliumLB is the cilium-lb binary node i runs (Options.CiliumLB).
func (l *Lab) ciliumLB(i int) string {
	if b := l.opts.CiliumLB[nodeName(i)]; b != "" {
		return b
	}
	return "cilium-lb"
}

func (l *Lab) startCilium(i int) error {
	if err := checkCiliumBinaries(l.opts.BinDir, l.ciliumLB(i)); err != nil {
		return err
	}
	if err := l.mountNodeBPFFS(i); err != nil {
		return err
	}
	args := append([]string{filepath.Join(l.opts.BinDir, l.ciliumLB(i)),
		"--node-name=" + nodeName(i),
		"--k8s-kubeconfig-path=" + l.kubeconfig,
		"--bpf-root=" + l.nodeBPFFS(i),
	}, l.opts.ProxyArgs...)
	_, err := l.startEnv(kubeProxyName(i), nodeNS(l.opts.Name, i), nil, args)
	return err
}

// waitCilium waits until cilium-lb on node i has written the "kubernetes"
// Service's backend into the node's maps.
func (l *Lab) waitCilium(ctx context.Context, i int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		p := l.proc(kubeProxyName(i))
		if p == nil || !p.Alive() {
			return fmt.Errorf("cilium-lb on %s exited; see %s", nodeName(i), filepath.Join(l.opts.Dir, "logs", sanitize(kubeProxyName(i))+".log"))
		}
		b, err := l.ciliumBackends(i, kubernetesServiceIP, 443)
		if err == nil && len(b) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cilium-lb on %s wrote no kubernetes Service after %s (last: %v)", nodeName(i), timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// CiliumLBList runs Cilium's own `cilium-dbg bpf lb list -o json` on node's
// maps. cilium-dbg reads the first bpf mount it finds, so it runs in a
// mount namespace of its own where every other bpf mount is detached.
// Extra arguments go to `bpf lb list` (e.g. --frontends: each master
// entry's "backend-id count[qcount] (rev-nat) [flags]").
func (l *Lab) CiliumLBList(node string, args ...string) ([]byte, error) {
	i, err := l.index(node)
	if err != nil {
		return nil, err
	}
	return l.ciliumLBList(i, args...)
}

// CiliumLBListCmd is the command CiliumLBList runs, for a caller that
// wants its rusage (unshare, the shell, its umounts and cilium-dbg).
func (l *Lab) CiliumLBListCmd(node string, args ...string) (*exec.Cmd, error) {
	i, err := l.index(node)
	if err != nil {
		return nil, err
	}
	return l.ciliumLBListCmd(i, args...)
}

func (l *Lab) ciliumLBListCmd(i int, args ...string) (*exec.Cmd, error) {
	others, err := bpfMountsExcept(l.nodeBPFFS(i))
	if err != nil {
		return nil, err
	}
	script := ""
	for _, m := range others {
		script += "umount -l " + strconv.Quote(m) + " && "
	}
	script += "exec " + strconv.Quote(filepath.Join(l.opts.BinDir, "cilium-dbg")) + " bpf lb list -o json"
	for _, a := range args {
		script += " " + strconv.Quote(a)
	}
	return exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script), nil
}

func (l *Lab) ciliumLBList(i int, args ...string) ([]byte, error) {
	cmd, err := l.ciliumLBListCmd(i, args...)
	if err != nil {
		return nil, err
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("cilium-dbg bpf lb list on %s: %w", nodeName(i), err)
	}
	return out, nil
}

// ciliumBackends returns the backends Cilium's listing gives the ClusterIP
// frontend ip:port/TCP on node i, "IP:PORT" sorted.
func (l *Lab) ciliumBackends(i int, ip string, port int) ([]string, error) {
	out, err := l.ciliumLBList(i)
	if err != nil {
		return nil, err
	}
	return parseCiliumBackends(out, ip, port)
}

// parseCiliumBackends reads the slot entries (slot > 0) of ip:port/TCP in
// `cilium-dbg bpf lb list -o json` ("10.244.1.2:8080/TCP (7) (1)").
func parseCiliumBackends(listing []byte, ip string, port int) ([]string, error) {
	var m map[string][]string
	if err := json.Unmarshal(listing, &m); err != nil {
		return nil, fmt.Errorf("cilium-dbg listing: %w", err)
	}
	prefix := fmt.Sprintf("%s:%d/TCP (", ip, port)
	var out []string
	for k, entries := range m {
		if !strings.HasPrefix(k, prefix) || strings.HasSuffix(k, "(0)") {
			continue
		}
		for _, e := range entries {
			if f := strings.Fields(e); len(f) > 0 {
				out = append(out, strings.TrimSuffix(f[0], "/TCP"))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// bpfMountsExcept lists the bpf mount points of this mount namespace other
// than keep.
func bpfMountsExcept(keep string) ([]string, error) {
	mounts, err := mountsOfType("bpf")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if m != keep {
			out = append(out, m)
		}
	}
	return out, nil
}

// mount is one line of /proc/self/mountinfo: mount point and type.
type mount struct{ point, fstype string }

// mounts lists this mount namespace's mounts.
func mounts() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, postF := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(postF) > 0 {
			out = append(out, mount{point: fields[4], fstype: postF[0]})
		}
	}
	return out, sc.Err()
}

// mountsOfType lists mount points of a filesystem type.
func mountsOfType(fstype string) ([]string, error) {
	ms, err := mounts()
	var out []string
	for _, m := range ms {
		if m.fstype == fstype {
			out = append(out, m.point)
		}
	}
	return out, err
}

// unmountUnder detaches every mount below dir (the nodes' bpf filesystems)
// so the lab directory can be removed.
func unmountUnder(dir string) error {
	ms, err := mounts()
	if err != nil {
		return err
	}
	var errs []string
	for _, m := range ms {
		if !strings.HasPrefix(m.point, dir+string(os.PathSeparator)) {
			continue
		}
		if err := unix.Unmount(m.point, unix.MNT_DETACH); err != nil {
			errs = append(errs, m.point+": "+err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("unmount: %s", strings.Join(errs, "; "))
	}
	return nil
}
