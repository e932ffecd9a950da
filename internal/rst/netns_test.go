package rst

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// requireRoot skips when not root: the probe and the namespaces need it.
func requireRoot(tb testing.TB) {
	tb.Helper()
	netnstest.RequireRoot(tb, "loads eBPF programs and creates network namespaces")
}

// ensureTracefs mounts tracefs at /sys/kernel/tracing when nothing is mounted
// there (some containers do not mount it); the tracepoint mode needs it.
func ensureTracefs(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat("/sys/kernel/tracing/events"); err == nil {
		return
	}
	if err := unix.Mount("nodev", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
		tb.Logf("tracefs not mounted and mount failed: %v", err)
		return
	}
	tb.Logf("mounted tracefs at /sys/kernel/tracing (it was not mounted)")
}

var nsSeq atomic.Int32

// pair is a "pod" and a "client" network namespace joined by a veth pair.
type pair struct {
	pod, client     string // namespace names
	pod4, client4   netip.Addr
	pod6, client6   netip.Addr
	podNs, clientNs netns.NsHandle
}

func run(tb testing.TB, args ...string) {
	tb.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newPair builds the two namespaces with IPv4 and IPv6 addresses that embed
// the test process id, so concurrent test processes never share an address.
func newPair(tb testing.TB) *pair {
	tb.Helper()
	n := nsSeq.Add(1)
	pid := os.Getpid()
	base := fmt.Sprintf("nd-rst-%d-%d", pid, n)
	p := &pair{pod: base + "-pod", client: base + "-cli"}
	k := (pid*31 + int(n)) % 250
	p.pod4 = netip.AddrFrom4([4]byte{198, 18, byte(k), 1})
	p.client4 = netip.AddrFrom4([4]byte{198, 18, byte(k), 2})
	p.pod6 = netip.MustParseAddr(fmt.Sprintf("fd6e:6472:%x:%x::1", pid&0xffff, n))
	p.client6 = netip.MustParseAddr(fmt.Sprintf("fd6e:6472:%x:%x::2", pid&0xffff, n))
	vp := fmt.Sprintf("ndr%dp%d", pid%100000, n)
	vc := fmt.Sprintf("ndr%dc%d", pid%100000, n)

	netnstest.Add(tb, p.pod)
	netnstest.Add(tb, p.client)
	run(tb, "ip", "link", "add", vp, "netns", p.pod, "type", "veth", "peer", "name", vc, "netns", p.client)
	for _, c := range []struct {
		ns, dev string
		a4, a6  netip.Addr
	}{{p.pod, vp, p.pod4, p.pod6}, {p.client, vc, p.client4, p.client6}} {
		run(tb, "ip", "-n", c.ns, "link", "set", "lo", "up")
		run(tb, "ip", "-n", c.ns, "addr", "add", c.a4.String()+"/24", "dev", c.dev)
		run(tb, "ip", "-n", c.ns, "addr", "add", c.a6.String()+"/64", "dev", c.dev, "nodad")
		run(tb, "ip", "-n", c.ns, "link", "set", c.dev, "up")
	}
	var err error
	if p.podNs, err = netns.GetFromName(p.pod); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.podNs.Close() })
	if p.clientNs, err = netns.GetFromName(p.client); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.clientNs.Close() })
	return p
}

// inNetns runs fn on a locked thread switched into ns.
func inNetns(ns netns.NsHandle, fn func() error) error { return netnstest.Do(ns, fn) }

// connectRefused makes n blocking TCP connection attempts from the client
// namespace to dst; each must be refused (one RST each).
func connectRefused(tb testing.TB, ns netns.NsHandle, dst netip.AddrPort, n int) {
	tb.Helper()
	err := inNetns(ns, func() error {
		for i := 0; i < n; i++ {
			if err := connectOnce(dst); err != unix.ECONNREFUSED {
				return fmt.Errorf("attempt %d to %s: got %v, want connection refused", i, dst, err)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

func connectOnce(dst netip.AddrPort) error {
	var sa unix.Sockaddr
	fam := unix.AF_INET
	if dst.Addr().Is4() {
		sa = &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
	} else {
		fam = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}
	}
	fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	err = unix.Connect(fd, sa)
	if errno, ok := err.(syscall.Errno); ok {
		return unix.Errno(errno)
	}
	return err
}
