package node

import (
	"net"
	"net/netip"
	"sort"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/vishvananda/netlink"
)

// operStateName spells a link's operational state the way `ip link` does
// (lower case, no dashes).
func operStateName(s netlink.LinkOperState) string {
	switch s {
	case netlink.OperNotPresent:
		return "notpresent"
	case netlink.OperDown:
		return "down"
	case netlink.OperLowerLayerDown:
		return "lowerlayerdown"
	case netlink.OperTesting:
		return "testing"
	case netlink.OperDormant:
		return "dormant"
	case netlink.OperUp:
		return "up"
	}
	return "unknown"
}

// addrPrefix converts an interface address.
func addrPrefix(a netlink.Addr) (netip.Prefix, bool) {
	if a.IPNet == nil {
		return netip.Prefix{}, false
	}
	ip := ipAddr(a.IP)
	if !ip.IsValid() {
		return netip.Prefix{}, false
	}
	ones, _ := a.Mask.Size()
	if ip.Is4() && ones > 32 {
		ones -= 96
	}
	return netip.PrefixFrom(ip, ones), true
}

// linkFromNetlink converts one link; addrs are its addresses, names maps
// link index to name (for the master). Pure.
func linkFromNetlink(l netlink.Link, addrs []netlink.Addr, names map[int]string) model.Link {
	at := l.Attrs()
	out := model.Link{
		Index:       at.Index,
		Name:        at.Name,
		Kind:        l.Type(),
		AdminUp:     at.Flags&net.FlagUp != 0,
		OperState:   operStateName(at.OperState),
		Master:      names[at.MasterIndex],
		PeerNetnsID: -1,
	}
	if out.Kind == "veth" || out.Kind == "netkit" {
		out.PeerNetnsID = at.NetNsID
		out.PeerIndex = at.ParentIndex
	}
	for _, a := range addrs {
		if p, ok := addrPrefix(a); ok {
			out.Addrs = append(out.Addrs, p)
		}
	}
	sort.Slice(out.Addrs, func(i, j int) bool { return out.Addrs[i].Addr().Less(out.Addrs[j].Addr()) })
	return out
}

// linksFromNetlink converts a link dump with its address dump, by index order.
func linksFromNetlink(ls []netlink.Link, addrs []netlink.Addr) []model.Link {
	names := linkNames(ls)
	byLink := map[int][]netlink.Addr{}
	for _, a := range addrs {
		byLink[a.LinkIndex] = append(byLink[a.LinkIndex], a)
	}
	out := make([]model.Link, 0, len(ls))
	for _, l := range ls {
		out = append(out, linkFromNetlink(l, byLink[l.Attrs().Index], names))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

func linkNames(ls []netlink.Link) map[int]string {
	m := make(map[int]string, len(ls))
	for _, l := range ls {
		m[l.Attrs().Index] = l.Attrs().Name
	}
	return m
}

// peerAddrs returns the addresses of link index idx from a peer namespace's
// address dump.
func peerAddrs(addrs []netlink.Addr, idx int) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if a.LinkIndex != idx {
			continue
		}
		if p, ok := addrPrefix(a); ok {
			out = append(out, p.Addr())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}
