package ipvs

import (
	"fmt"
	"net"
	"net/netip"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/model"
)

// IPVS service flag for persistence (session affinity), from the kernel's
// include/uapi/linux/ip_vs.h.
const svcFlagPersistent = 0x0001

// decodeService turns one netlink service and its destinations into a
// VirtualServer. Pure: no kernel access.
func decodeService(s *mobyipvs.Service, dsts []*mobyipvs.Destination) (VirtualServer, error) {
	fam, err := family(s.AddressFamily)
	if err != nil {
		return VirtualServer{}, fmt.Errorf("ipvs: service %s: %w", describe(s), err)
	}
	vs := VirtualServer{
		FWMark:     s.FWMark,
		Family:     fam,
		Scheduler:  s.SchedName,
		Persistent: s.Flags&svcFlagPersistent != 0,
	}
	if vs.Persistent {
		vs.Timeout = s.Timeout
	}
	if s.FWMark == 0 {
		if vs.Protocol, err = protocol(s.Protocol); err != nil {
			return VirtualServer{}, fmt.Errorf("ipvs: service %s: %w", describe(s), err)
		}
		a, err := addr(s.Address, fam)
		if err != nil {
			return VirtualServer{}, fmt.Errorf("ipvs: service %s: %w", describe(s), err)
		}
		vs.Addr = netip.AddrPortFrom(a, s.Port)
	}
	for _, d := range dsts {
		r, err := decodeDestination(d, fam)
		if err != nil {
			return VirtualServer{}, fmt.Errorf("ipvs: real server of %s: %w", vs.ID(), err)
		}
		vs.Reals = append(vs.Reals, r)
	}
	return vs, nil
}

func decodeDestination(d *mobyipvs.Destination, svcFam model.IPFamily) (RealServer, error) {
	fam := svcFam
	if d.AddressFamily != 0 { // older kernels do not send the attribute
		var err error
		if fam, err = family(d.AddressFamily); err != nil {
			return RealServer{}, err
		}
	}
	a, err := addr(d.Address, fam)
	if err != nil {
		return RealServer{}, err
	}
	return RealServer{
		Addr:     netip.AddrPortFrom(a, d.Port),
		Weight:   d.Weight,
		Forward:  forwardName(d.ConnectionFlags),
		Active:   d.ActiveConnections,
		Inactive: d.InactiveConnections,
	}, nil
}

func family(af uint16) (model.IPFamily, error) {
	switch af {
	case unix.AF_INET:
		return model.IPv4, nil
	case unix.AF_INET6:
		return model.IPv6, nil
	}
	return "", fmt.Errorf("unknown address family %d", af)
}

func protocol(p uint16) (model.Protocol, error) {
	switch p {
	case unix.IPPROTO_TCP:
		return model.TCP, nil
	case unix.IPPROTO_UDP:
		return model.UDP, nil
	case unix.IPPROTO_SCTP:
		return model.SCTP, nil
	}
	return "", fmt.Errorf("unknown IP protocol %d", p)
}

func addr(ip net.IP, fam model.IPFamily) (netip.Addr, error) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, fmt.Errorf("bad address %v (%d bytes)", []byte(ip), len(ip))
	}
	if fam == model.IPv4 {
		a = a.Unmap()
		if !a.Is4() {
			return netip.Addr{}, fmt.Errorf("IPv4 service with address %s", a)
		}
	}
	return a, nil
}

func forwardName(flags uint32) string {
	switch flags & mobyipvs.ConnFwdMask {
	case mobyipvs.ConnFwdMasq:
		return ForwardMasq
	case mobyipvs.ConnFwdLocalNode:
		return ForwardLocal
	case mobyipvs.ConnFwdTunnel:
		return ForwardTunnel
	case mobyipvs.ConnFwdDirectRoute:
		return ForwardRoute
	}
	return ForwardBypass
}

// describe names a raw service in errors without trusting its fields.
func describe(s *mobyipvs.Service) string {
	if s.FWMark != 0 {
		return fmt.Sprintf("fwmark %d", s.FWMark)
	}
	return fmt.Sprintf("%v:%d proto %d family %d", s.Address, s.Port, s.Protocol, s.AddressFamily)
}
