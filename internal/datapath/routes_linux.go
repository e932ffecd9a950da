package datapath

import (
	"context"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/nodecheck"
)

// NodeStateConfig says where and what NodeStateWith reads.
type NodeStateConfig struct {
	// Netns is the network namespace to read: "" for the caller's own, a
	// name (as `ip netns` knows it) or a path such as /proc/1/ns/net.
	Netns string
	// ProcPath is where processes are listed to find the namespaces veth
	// peers live in ("" = /proc; /host/proc in a container).
	ProcPath string
	// NetnsDirs hold named namespaces (bind mounts); nil = /run/netns and /var/run/netns.
	NetnsDirs []string
	// SkipPeers and SkipConntrack leave those parts out.
	SkipPeers, SkipConntrack bool
}

// NodeState reads routes (all tables), links with their addresses and veth
// peers' addresses, and the conntrack table of one network namespace.
// It only reads.
func NodeState(ctx context.Context, netnsSpec string) (nodecheck.NodeSnapshot, error) {
	return NodeStateWith(ctx, NodeStateConfig{Netns: netnsSpec})
}

// NodeStateWith is NodeState with every setting.
func NodeStateWith(ctx context.Context, cfg NodeStateConfig) (nodecheck.NodeSnapshot, error) {
	var snap nodecheck.NodeSnapshot
	ns, err := openNetns(cfg.Netns)
	if err != nil {
		return snap, err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return snap, fmt.Errorf("netlink in netns %q: %w", cfg.Netns, err)
	}
	defer h.Close()
	raw, err := fetchNetlink(h)
	if err != nil {
		return snap, fmt.Errorf("netns %q: %w", cfg.Netns, err)
	}
	snap.Links = linksFromNetlink(raw.links, raw.addrs)
	snap.Routes = routesFromNetlink(raw.routes, linkNames(raw.links))
	if err := ctx.Err(); err != nil {
		return snap, err
	}
	if !cfg.SkipPeers {
		snap.Warnings = append(snap.Warnings, resolvePeers(h, ns, cfg, snap.Links)...)
	}
	if cfg.SkipConntrack {
		snap.ConntrackUnavailable = "not read (disabled)"
		return snap, nil
	}
	if err := ctx.Err(); err != nil {
		return snap, err
	}
	flows, err := dumpConntrack(ns)
	if err != nil {
		snap.ConntrackUnavailable = err.Error()
		snap.Warnings = append(snap.Warnings, "conntrack: "+err.Error())
	}
	snap.Flows = flowsFromConntrack(flows)
	return snap, nil
}

// netlinkDump is the raw kernel answer, before conversion.
type netlinkDump struct {
	links  []netlink.Link
	addrs  []netlink.Addr
	routes []netlink.Route
}

// fetchNetlink dumps links, addresses and routes of every table. No logic.
func fetchNetlink(h *netlink.Handle) (netlinkDump, error) {
	var d netlinkDump
	var err error
	if d.links, err = h.LinkList(); err != nil {
		return d, fmt.Errorf("list links: %w", err)
	}
	if d.addrs, err = h.AddrList(nil, netlink.FAMILY_ALL); err != nil {
		return d, fmt.Errorf("list addresses: %w", err)
	}
	filter := &netlink.Route{Table: unix.RT_TABLE_UNSPEC}
	if d.routes, err = h.RouteListFiltered(netlink.FAMILY_ALL, filter, netlink.RT_FILTER_TABLE); err != nil {
		return d, fmt.Errorf("list routes: %w", err)
	}
	return d, nil
}

// openNetns opens a namespace by name, by path, or the caller's own ("").
func openNetns(spec string) (netns.NsHandle, error) {
	var h netns.NsHandle
	var err error
	switch {
	case spec == "":
		h, err = netns.Get()
	case strings.Contains(spec, "/"):
		h, err = netns.GetFromPath(spec)
	default:
		h, err = netns.GetFromName(spec)
	}
	if err != nil {
		return netns.None(), fmt.Errorf("open netns %q: %w", spec, err)
	}
	return h, nil
}
