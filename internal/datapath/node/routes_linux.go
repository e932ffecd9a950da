package node

import (
	"context"
	"fmt"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Config says where and what ReadWith reads.
type Config struct {
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

// Read reads routes (all tables), links with their addresses and veth
// peers' addresses, and the conntrack table of one network namespace.
// It only reads.
func Read(ctx context.Context, netnsSpec string) (model.NodeSnapshot, error) {
	return ReadWith(ctx, Config{Netns: netnsSpec})
}

// ReadWith is Read with every setting.
func ReadWith(ctx context.Context, cfg Config) (model.NodeSnapshot, error) {
	var snap model.NodeSnapshot
	ns, err := nsutil.Open(cfg.Netns)
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
