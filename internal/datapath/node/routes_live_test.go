package node

// Real-kernel tests of Read + nodecheck.Check. Each test builds its own
// "nodes" and "pods" as network namespaces joined by veths, with the routes a
// CNI would install, and tears them down with t.Cleanup. Nothing touches the
// host's own namespace.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/testutil/findingtest"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// nodeLab creates namespaces named nd-dpnode-<pid>-<n>-<role>.
type nodeLab struct {
	t  *testing.T
	id string
}

func newNodeLab(t *testing.T) *nodeLab {
	t.Helper()
	netnstest.RequireRoot(t, "creates network namespaces")
	return &nodeLab{t: t, id: netnstest.Name("nd-dpnode")}
}

// netns creates a namespace for role, with lo up, deleted at cleanup.
func (l *nodeLab) netns(role string) string {
	l.t.Helper()
	name := netnstest.Add(l.t, l.id+"-"+role)
	l.ip(name, "link", "set", "lo", "up")
	return name
}

func (l *nodeLab) run(args ...string) string {
	l.t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ip runs `ip -n ns ARGS`.
func (l *nodeLab) ip(ns string, args ...string) string {
	l.t.Helper()
	return l.run(append([]string{"ip", "-n", ns}, args...)...)
}

// pod creates pod namespace podNS with address ip/32 on eth0, reachable from
// node over host interface hostIf (gateway gw on the host side), and the
// node's /32 route to it, as Calico or Cilium native routing do.
func (l *nodeLab) pod(node, podNS, hostIf, ip, gw string) {
	l.t.Helper()
	l.ip(node, "link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", podNS)
	l.ip(podNS, "addr", "add", ip+"/32", "dev", "eth0")
	l.ip(podNS, "link", "set", "eth0", "up")
	l.ip(podNS, "route", "add", gw, "dev", "eth0", "scope", "link")
	l.ip(podNS, "route", "add", "default", "via", gw, "dev", "eth0")
	l.ip(node, "addr", "add", gw+"/32", "dev", hostIf)
	l.ip(node, "link", "set", hostIf, "up")
	l.ip(node, "route", "add", ip+"/32", "dev", hostIf, "proto", "static")
}

// lanNode connects node to the lan bridge with address addr on its eth0.
func (l *nodeLab) lanNode(lan, node, port, addr string) {
	l.t.Helper()
	l.ip(lan, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", node)
	l.ip(lan, "link", "set", port, "master", "br0", "up")
	l.ip(node, "addr", "add", addr+"/24", "dev", "eth0")
	l.ip(node, "link", "set", "eth0", "up")
	l.forward(node)
}

// forward enables IPv4 forwarding in ns (the namespace's own sysctl).
func (l *nodeLab) forward(ns string) {
	l.t.Helper()
	err := inNetns(ns, func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644) })
	if err != nil {
		l.t.Fatalf("ip_forward in %s: %v", ns, err)
	}
}

// inNetns runs fn on a thread switched into the named namespace; sockets fn
// opens stay there.
func inNetns(name string, fn func() error) error { return netnstest.DoNamed(name, fn) }

// udpEcho starts a UDP echo server on addr inside ns.
func udpEcho(t *testing.T, ns, addr string) {
	t.Helper()
	var pc net.PacketConn
	if err := inNetns(ns, func() (err error) { pc, err = net.ListenPacket("udp4", addr); return }); err != nil {
		t.Fatalf("listen udp %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
}

// udpAsk sends one datagram from ns to target and waits for the echo; the
// socket stays open until cleanup so its conntrack entry lives on.
func udpAsk(t *testing.T, ns, target string) {
	t.Helper()
	var c net.Conn
	if err := inNetns(ns, func() (err error) { c, err = net.Dial("udp4", target); return }); err != nil {
		t.Fatalf("dial udp %s from %s: %v", target, ns, err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatalf("udp write to %s: %v", target, err)
	}
	buf := make([]byte, 16)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("udp echo from %s: %q %v", target, buf[:n], err)
	}
}

func liveSnapshot(t *testing.T, ns string) *model.NodeSnapshot {
	t.Helper()
	s, err := Read(context.Background(), ns)
	if err != nil {
		t.Fatalf("Read(%s): %v", ns, err)
	}
	return &s
}

func liveNode(name, cidr, addr string) model.NodeInfo {
	return model.NodeInfo{Name: name, Ready: true, ReadySince: time.Now().Add(-time.Hour),
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix(cidr)}, Addresses: []netip.Addr{netip.MustParseAddr(addr)}}
}

func livePod(name, node, ip string) model.PodInfo {
	return model.PodInfo{Namespace: "shop", Name: name, NodeName: node, IPs: []netip.Addr{netip.MustParseAddr(ip)}}
}

func wantLive(t *testing.T, fs []model.Finding, want ...string) {
	t.Helper()
	if got := strings.Join(findingtest.Kinds(fs), "\n"); got != strings.Join(want, "\n") {
		var b strings.Builder
		for _, f := range fs {
			b.WriteString("  " + f.Detail + "\n")
		}
		t.Fatalf("findings:\n%s\nwant:\n%s\ndetails:\n%s", got, strings.Join(want, "\n"), b.String())
	}
}

// threeNodeLab builds a lan with nodes a, b and c routing each other's
// podCIDRs via their node addresses (host-gw), a pod on a and one on b.
func threeNodeLab(t *testing.T) (l *nodeLab, a, c string, in nodecheck.Inputs) {
	l = newNodeLab(t)
	lan := l.netns("lan")
	l.ip(lan, "link", "add", "br0", "type", "bridge")
	l.ip(lan, "link", "set", "br0", "up")
	a, b, c := l.netns("a"), l.netns("b"), l.netns("c")
	pa, pb := l.netns("pa1"), l.netns("pb1")
	l.lanNode(lan, a, "pa", "192.168.77.10")
	l.lanNode(lan, b, "pb", "192.168.77.11")
	l.lanNode(lan, c, "pc", "192.168.77.12")
	l.pod(a, pa, "vpa1", "10.77.0.5", "10.77.0.1")
	l.pod(b, pb, "vpb1", "10.77.1.5", "10.77.1.1")
	for node, own := range map[string]int{a: 0, b: 1, c: 2} {
		l.ip(node, "route", "add", "blackhole", fmt.Sprintf("10.77.%d.0/24", own))
		for other := 0; other < 3; other++ {
			if other != own {
				l.ip(node, "route", "add", fmt.Sprintf("10.77.%d.0/24", other), "via", fmt.Sprintf("192.168.77.%d", 10+other))
			}
		}
	}
	in = nodecheck.Inputs{NodeName: "a",
		Nodes: []model.NodeInfo{liveNode("a", "10.77.0.0/24", "192.168.77.10"),
			liveNode("b", "10.77.1.0/24", "192.168.77.11"), liveNode("c", "10.77.2.0/24", "192.168.77.12")},
		Pods: []model.PodInfo{livePod("web-a", "a", "10.77.0.5"), livePod("web-b", "b", "10.77.1.5")}}
	// the topology really carries pod traffic across nodes
	udpEcho(t, pb, "10.77.1.5:7000")
	udpAsk(t, pa, "10.77.1.5:7000")
	return l, a, c, in
}

func TestNodeStateLiveRoutes(t *testing.T) {
	l, a, c, in := threeNodeLab(t)

	in.Snapshot = liveSnapshot(t, a)
	fs, info := nodecheck.Check(in, nodecheck.Config{}, time.Now())
	wantLive(t, fs) // healthy: nothing
	if len(info.RouteModes) != 1 || info.RouteModes[0].Mode != nodecheck.RouteModePerNode {
		t.Errorf("route mode %+v, want per-node", info.RouteModes)
	}
	if info.RoutesChecked != 3 || info.LinksChecked != 3 {
		t.Errorf("info %+v", info)
	}
	// the pod's veth peer was found in its namespace, with the pod's address
	if l := liveLink(t, in.Snapshot, "vpa1"); !l.PeerResolved || len(l.PeerAddrs) == 0 || l.PeerAddrs[0].String() != "10.77.0.5" || l.Kind != "veth" {
		t.Errorf("vpa1: %+v", l)
	}

	// a route lost on the node: per-node layout, so it is missing
	l.ip(a, "route", "del", "10.77.1.0/24")
	in.Snapshot = liveSnapshot(t, a)
	fs, _ = nodecheck.Check(in, nodecheck.Config{}, time.Now())
	wantLive(t, fs, "missing_route 10.77.1.0/24 (node b)")
	l.ip(a, "route", "add", "10.77.1.0/24", "via", "192.168.77.11")

	// node c is deleted: its machine is gone and so is its Node object, but
	// node a still routes c's podCIDR to c's address
	l.run("ip", "netns", "del", c)
	in.Nodes = in.Nodes[:2]
	in.Snapshot = liveSnapshot(t, a)
	fs, _ = nodecheck.Check(in, nodecheck.Config{}, time.Now())
	wantLive(t, fs, "stale_route 10.77.2.0/24 via 192.168.77.12 dev eth0")
	if !strings.Contains(fs[0].Detail, "192.168.77.12, which is the address of no existing node") {
		t.Errorf("detail %q", fs[0].Detail)
	}

	// with the pod network given explicitly, a blackhole for a range no node owns is stale too
	l.ip(a, "route", "add", "blackhole", "10.77.9.0/24")
	in.Snapshot = liveSnapshot(t, a)
	cfg := nodecheck.Config{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/16")}}
	fs, _ = nodecheck.Check(in, cfg, time.Now())
	wantLive(t, fs, "stale_route 10.77.2.0/24 via 192.168.77.12 dev eth0", "stale_route blackhole 10.77.9.0/24")
}

func liveLink(t *testing.T, s *model.NodeSnapshot, name string) model.Link {
	t.Helper()
	for _, l := range s.Links {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no link %s in %+v", name, s.Links)
	return model.Link{}
}

func TestNodeStateLiveRoutesIPv6(t *testing.T) {
	l := newNodeLab(t)
	lan := l.netns("lan")
	l.ip(lan, "link", "add", "br0", "type", "bridge")
	l.ip(lan, "link", "set", "br0", "up")
	a := l.netns("a")
	nodes := []model.NodeInfo{}
	for i, name := range []string{"a", "b", "c"} {
		ns := a
		if i > 0 {
			ns = l.netns(name)
		}
		l.ip(lan, "link", "add", "p"+name, "type", "veth", "peer", "name", "eth0", "netns", ns)
		l.ip(lan, "link", "set", "p"+name, "master", "br0", "up")
		l.ip(ns, "addr", "add", fmt.Sprintf("fd00:192:77::%d/64", 10+i), "dev", "eth0", "nodad")
		l.ip(ns, "link", "set", "eth0", "up")
		nodes = append(nodes, liveNode(name, fmt.Sprintf("fd00:77:0:%d::/64", i), fmt.Sprintf("fd00:192:77::%d", 10+i)))
	}
	l.ip(a, "-6", "route", "add", "blackhole", "fd00:77:0:0::/64")
	l.ip(a, "-6", "route", "add", "fd00:77:0:1::/64", "via", "fd00:192:77::11")
	// a next hop given by its link-local address, as BGP unnumbered setups do
	l.ip(a, "-6", "route", "add", "fd00:77:0:2::/64", "via", "fe80::c", "dev", "eth0")
	in := nodecheck.Inputs{NodeName: "a", Nodes: nodes}

	in.Snapshot = liveSnapshot(t, a)
	fs, info := nodecheck.Check(in, nodecheck.Config{}, time.Now())
	wantLive(t, fs)
	if len(info.RouteModes) != 1 || info.RouteModes[0].Family != model.IPv6 || info.RouteModes[0].Mode != nodecheck.RouteModePerNode {
		t.Errorf("route modes %+v", info.RouteModes)
	}

	// node b and node c are deleted; b's route is judged by its gateway,
	// c's (link-local next hop) by its destination
	in.Nodes = nodes[:1]
	cfg := nodecheck.Config{RouteMode: nodecheck.RouteModePerNode}
	fs, _ = nodecheck.Check(in, cfg, time.Now())
	wantLive(t, fs, "stale_route fd00:77:0:1::/64 via fd00:192:77::11 dev eth0",
		"stale_route fd00:77:0:2::/64 via fe80::c dev eth0")
}
