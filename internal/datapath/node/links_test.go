package node

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/vishvananda/netlink"
)

func nlAddr(idx int, cidr string) netlink.Addr {
	ip, n, err := net.ParseCIDR(cidr)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return netlink.Addr{IPNet: n, LinkIndex: idx}
}

func testNetlinkLinks() ([]netlink.Link, []netlink.Addr) {
	attrs := func(idx int, name string, up bool, oper netlink.LinkOperState) netlink.LinkAttrs {
		a := netlink.NewLinkAttrs()
		a.Index, a.Name, a.OperState = idx, name, oper
		if up {
			a.Flags = net.FlagUp
		}
		return a
	}
	eth := &netlink.Device{LinkAttrs: attrs(2, "eth0", true, netlink.OperUp)}
	br := &netlink.Bridge{LinkAttrs: attrs(3, "cni0", true, netlink.OperUp)}
	v1 := &netlink.Veth{LinkAttrs: attrs(5, "veth1", true, netlink.OperUp)}
	v1.MasterIndex, v1.NetNsID, v1.ParentIndex = 3, 4, 2
	v2 := &netlink.Veth{LinkAttrs: attrs(6, "cali99", true, netlink.OperLowerLayerDown)}
	v2.NetNsID, v2.ParentIndex = 0, 7
	hostPair := &netlink.Veth{LinkAttrs: attrs(7, "cilium_host", true, netlink.OperUp)}
	hostPair.ParentIndex = 8 // peer in the same namespace: NetNsID stays -1
	vx := &netlink.Vxlan{LinkAttrs: attrs(4, "flannel.1", true, netlink.OperUnknown)}
	dummy := &netlink.Dummy{LinkAttrs: attrs(9, "kube-ipvs0", false, netlink.OperDown)}
	lo := &netlink.Device{LinkAttrs: attrs(1, "lo", true, netlink.OperUnknown)}
	links := []netlink.Link{eth, br, v1, v2, hostPair, vx, dummy, lo}
	addrs := []netlink.Addr{
		nlAddr(2, "192.168.1.10/24"), nlAddr(2, "fd00:192::10/64"), nlAddr(3, "10.244.0.1/24"),
		nlAddr(4, "10.244.0.0/32"), nlAddr(9, "10.96.0.10/32"), nlAddr(9, "10.96.0.1/32"), nlAddr(1, "127.0.0.1/8"),
		{LinkIndex: 2}, // no address: ignored
	}
	return links, addrs
}

func renderLinks(ls []model.Link) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%d %s kind=%s up=%v oper=%s master=%q peer=%d/%d addrs=%v down=%v\n",
			l.Index, l.Name, l.Kind, l.AdminUp, l.OperState, l.Master, l.PeerNetnsID, l.PeerIndex, l.Addrs, l.Down())
	}
	return b.String()
}

func TestLinksFromNetlinkGolden(t *testing.T) {
	links, addrs := testNetlinkLinks()
	got := linksFromNetlink(links, addrs)
	checkNodeGolden(t, "links.golden", renderLinks(got))
	byName := map[string]model.Link{}
	for _, l := range got {
		byName[l.Name] = l
	}
	if l := byName["veth1"]; l.Master != "cni0" || l.PeerNetnsID != 4 || l.PeerIndex != 2 || l.Kind != "veth" {
		t.Errorf("veth1: %+v", l)
	}
	if l := byName["cilium_host"]; l.PeerNetnsID != -1 {
		t.Errorf("same-namespace pair must have no peer netns: %+v", l)
	}
	if l := byName["flannel.1"]; l.Down() || l.OperState != "unknown" {
		t.Errorf("vxlan with unknown oper state is up: %+v", l)
	}
	if l := byName["cali99"]; !l.Down() || l.OperState != "lowerlayerdown" {
		t.Errorf("cali99: %+v", l)
	}
	if l := byName["kube-ipvs0"]; len(l.Addrs) != 2 || l.Addrs[0].String() != "10.96.0.1/32" {
		t.Errorf("kube-ipvs0 addresses sorted: %+v", l.Addrs)
	}
}

func TestPeerAddrs(t *testing.T) {
	addrs := []netlink.Addr{nlAddr(2, "10.244.0.5/24"), nlAddr(2, "fe80::1/64"), nlAddr(1, "127.0.0.1/8"), nlAddr(2, "fd00::5/64")}
	got := peerAddrs(addrs, 2)
	if fmt.Sprint(got) != "[10.244.0.5 fd00::5 fe80::1]" {
		t.Errorf("got %v", got)
	}
}
