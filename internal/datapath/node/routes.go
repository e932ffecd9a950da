package node

import (
	"net"
	"net/netip"
	"strconv"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Route protocol names as /etc/iproute2/rt_protos spells them.
var routeProtoNames = map[netlink.RouteProtocol]string{
	0: "unspec", 1: "redirect", 2: "kernel", 3: "boot", 4: "static", 8: "gated", 9: "ra", 10: "mrt",
	11: "zebra", 12: "bird", 13: "dnrouted", 14: "xorp", 15: "ntk", 16: "dhcp", 17: "mrouted",
	18: "keepalived", 42: "babel", 99: "openr", 186: "bgp", 187: "isis", 188: "ospf", 189: "rip", 192: "eigrp",
}

func routeProtoName(p netlink.RouteProtocol) string {
	if s, ok := routeProtoNames[p]; ok {
		return s
	}
	return strconv.Itoa(int(p))
}

func routeTypeName(t int) string {
	switch t {
	case unix.RTN_UNICAST:
		return model.RouteUnicast
	case unix.RTN_BLACKHOLE:
		return model.RouteBlackhole
	case unix.RTN_UNREACHABLE:
		return model.RouteUnreachable
	case unix.RTN_PROHIBIT:
		return model.RouteProhibit
	case unix.RTN_LOCAL:
		return model.RouteLocal
	}
	return model.RouteOther
}

// ipAddr converts a net.IP to an unmapped netip.Addr (invalid when empty).
func ipAddr(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}

// viaAddr returns the gateway of an RTA_VIA next hop (IPv4 routes via IPv6).
func viaAddr(d netlink.Destination) netip.Addr {
	if v, ok := d.(*netlink.Via); ok && v != nil {
		return ipAddr(v.Addr)
	}
	return netip.Addr{}
}

// routeFromNetlink converts one netlink route; names maps link index to name.
// It is pure: the kernel was read before.
func routeFromNetlink(r netlink.Route, names map[int]string) model.Route {
	out := model.Route{
		Type:     routeTypeName(r.Type),
		Table:    r.Table,
		Protocol: routeProtoName(r.Protocol),
		Gateway:  ipAddr(r.Gw),
		Dev:      names[r.LinkIndex],
		OnLink:   r.Flags&unix.RTNH_F_ONLINK != 0,
		LinkDown: r.Flags&unix.RTNH_F_LINKDOWN != 0,
	}
	if !out.Gateway.IsValid() {
		out.Gateway = viaAddr(r.Via)
	}
	out.Dst = routeDst(r)
	for _, h := range r.MultiPath {
		if h == nil {
			continue
		}
		nh := model.NextHop{Gateway: ipAddr(h.Gw), Dev: names[h.LinkIndex], OnLink: h.Flags&unix.RTNH_F_ONLINK != 0}
		if !nh.Gateway.IsValid() {
			nh.Gateway = viaAddr(h.Via)
		}
		out.LinkDown = out.LinkDown || h.Flags&unix.RTNH_F_LINKDOWN != 0
		out.NextHops = append(out.NextHops, nh)
	}
	return out
}

// routeDst returns the destination; a nil Dst is the family's default route.
func routeDst(r netlink.Route) netip.Prefix {
	if r.Dst != nil {
		if a := ipAddr(r.Dst.IP); a.IsValid() {
			ones, _ := r.Dst.Mask.Size()
			if a.Is4() && ones > 32 {
				ones -= 96
			}
			return netip.PrefixFrom(a, ones).Masked()
		}
	}
	if r.Family == unix.AF_INET6 {
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
}

// routesFromNetlink converts a route dump, in kernel order.
func routesFromNetlink(rs []netlink.Route, names map[int]string) []model.Route {
	out := make([]model.Route, 0, len(rs))
	for _, r := range rs {
		out = append(out, routeFromNetlink(r, names))
	}
	return out
}
