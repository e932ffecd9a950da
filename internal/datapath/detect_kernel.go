package datapath

import (
	"errors"
	"fmt"

	"github.com/netdrift/netdrift/internal/ipvs"
	"github.com/netdrift/netdrift/internal/nsutil"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// linkExistsInNetns reports whether a link exists, over rtnetlink.
func linkExistsInNetns(ns, name string) (bool, error) {
	h := netns.None()
	if ns != "" {
		var err error
		if h, err = netns.GetFromPath(nsutil.Path(ns)); err != nil {
			return false, fmt.Errorf("network namespace %q: %w", ns, err)
		}
		defer h.Close()
	}
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return false, fmt.Errorf("rtnetlink: %w", err)
	}
	defer nh.Close()
	_, err = nh.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return false, nil
	}
	return err == nil, err
}

// netlinkIPVS counts virtual servers with the IPVS reader's own client.
type netlinkIPVS struct{}

func (netlinkIPVS) CountServices(netnsPath string) (int, error) { return ipvs.CountServices(netnsPath) }
