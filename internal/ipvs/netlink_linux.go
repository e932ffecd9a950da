package ipvs

import (
	"errors"
	"fmt"
	"net/netip"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netlinkKernel reads IPVS over generic netlink (moby/ipvs) and link
// addresses over rtnetlink, both from sockets opened in the target netns, so
// no OS thread ever switches namespace.
type netlinkKernel struct {
	ipvs *mobyipvs.Handle
	link *netlink.Handle
}

// OpenNetlink opens netlink sockets in the namespace at netnsPath ("" for
// the caller's own namespace).
func OpenNetlink(netnsPath string) (Kernel, error) {
	h, err := mobyipvs.New(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("generic netlink: %w", err)
	}
	ns := netns.None()
	if netnsPath != "" {
		if ns, err = netns.GetFromPath(netnsPath); err != nil {
			h.Close()
			return nil, fmt.Errorf("netns %s: %w", netnsPath, err)
		}
		defer ns.Close()
	}
	// Only rtnetlink: the default set includes XFRM, which fails where
	// xfrm_user is not loaded.
	lh, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("rtnetlink: %w", err)
	}
	return &netlinkKernel{ipvs: h, link: lh}, nil
}

func (k *netlinkKernel) Services() ([]*mobyipvs.Service, error) { return k.ipvs.GetServices() }

func (k *netlinkKernel) Destinations(s *mobyipvs.Service) ([]*mobyipvs.Destination, error) {
	return k.ipvs.GetDestinations(s)
}

func (k *netlinkKernel) LinkAddrs(name string) ([]netip.Addr, error) {
	l, err := k.link.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%w: %s", ErrNoLink, name)
		}
		return nil, err
	}
	list, err := k.link.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(list))
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

func (k *netlinkKernel) Close() error {
	k.ipvs.Close()
	k.link.Close()
	return nil
}

// CountServices counts the virtual servers in the namespace at netnsPath
// ("" for the caller's own), for datapath mode detection.
func CountServices(netnsPath string) (int, error) {
	k, err := OpenNetlink(netnsPath)
	if err != nil {
		return 0, err
	}
	defer k.Close()
	svcs, err := k.Services()
	return len(svcs), err
}
