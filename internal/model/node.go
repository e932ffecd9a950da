package model

// The node's kernel state (routes, links, conntrack flows) and the few facts
// about Nodes, Pods and endpoints that the node-level checks need. The
// datapath/node reader and internal/watch build these; internal/nodecheck
// consumes them. See docs/architecture.md ("Domain types").

import (
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Route types as iproute2 names them.
const (
	RouteUnicast     = "unicast"
	RouteBlackhole   = "blackhole"
	RouteUnreachable = "unreachable"
	RouteProhibit    = "prohibit"
	RouteLocal       = "local"
	RouteOther       = "other"
)

// MainTable is the kernel's main routing table id.
const MainTable = 254

// NextHop is one path of a route.
type NextHop struct {
	Gateway netip.Addr // invalid for a device route
	Dev     string     // output device name ("" when unknown)
	OnLink  bool
}

// Route is one kernel route.
type Route struct {
	Dst      netip.Prefix // 0.0.0.0/0 or ::/0 for a default route
	Type     string       // RouteUnicast, RouteBlackhole, ...
	Table    int
	Protocol string // "kernel", "boot", "static", "bird", ... or a number
	Gateway  netip.Addr
	Dev      string
	OnLink   bool
	LinkDown bool      // the kernel marked the path linkdown
	NextHops []NextHop // multipath routes only; Gateway/Dev are then empty
}

// Hops returns the route's paths: its multipath next hops or its single one.
func (r Route) Hops() []NextHop {
	if len(r.NextHops) > 0 {
		return r.NextHops
	}
	if r.Dev == "" && !r.Gateway.IsValid() {
		return nil
	}
	return []NextHop{{Gateway: r.Gateway, Dev: r.Dev, OnLink: r.OnLink}}
}

// Reject reports whether the route discards traffic (blackhole, unreachable, prohibit).
func (r Route) Reject() bool {
	return r.Type == RouteBlackhole || r.Type == RouteUnreachable || r.Type == RouteProhibit
}

// String renders the route the way `ip route` does, in short.
func (r Route) String() string {
	var b strings.Builder
	if r.Type != "" && r.Type != RouteUnicast {
		b.WriteString(r.Type + " ")
	}
	b.WriteString(r.Dst.String())
	for _, h := range r.Hops() {
		if len(r.NextHops) > 0 {
			b.WriteString(" nexthop")
		}
		if h.Gateway.IsValid() {
			b.WriteString(" via " + h.Gateway.String())
		}
		if h.Dev != "" {
			b.WriteString(" dev " + h.Dev)
		}
		if h.OnLink {
			b.WriteString(" onlink")
		}
	}
	if r.Protocol != "" && r.Protocol != "boot" {
		b.WriteString(" proto " + r.Protocol)
	}
	if r.Table != 0 && r.Table != MainTable {
		b.WriteString(" table " + strconv.Itoa(r.Table))
	}
	return b.String()
}

// Link is one network interface of the node.
type Link struct {
	Index     int
	Name      string
	Kind      string // "veth", "vxlan", "bridge", "ipip", "wireguard", "dummy", "netkit", "device", ...
	AdminUp   bool
	OperState string // "up", "down", "lowerlayerdown", "unknown", ...
	Master    string // bridge or bond the link is enslaved to
	Addrs     []netip.Prefix
	// PeerNetnsID is the veth peer's netns id as this namespace knows it
	// (-1 when the peer is in the same namespace or there is none).
	PeerNetnsID int
	PeerIndex   int
	// PeerAddrs are the addresses on the peer (pod) side, filled when the
	// fetcher could open the peer's namespace; PeerResolved says it could.
	PeerAddrs    []netip.Addr
	PeerResolved bool
}

// Down reports whether traffic sent over the link goes nowhere.
func (l Link) Down() bool {
	if !l.AdminUp {
		return true
	}
	switch l.OperState {
	case "down", "lowerlayerdown", "notpresent":
		return true
	}
	return false
}

// Tuple is one direction of a conntrack entry.
type Tuple struct {
	Src, Dst netip.AddrPort
}

// Flow is one conntrack entry.
type Flow struct {
	Protocol Protocol
	Orig     Tuple
	Reply    Tuple
	TCPState string // "ESTABLISHED", "SYN_SENT", "TIME_WAIT", ...; "" for UDP
	Assured  bool
	Dying    bool
	Timeout  uint32 // seconds left
}

// DNATed reports whether the reply comes from somewhere else than the
// original destination, i.e. the flow was destination-NATed.
func (f Flow) DNATed() bool { return f.Reply.Src != f.Orig.Dst }

// String renders "udp 10.0.0.1:3456 -> 10.96.0.10:53 (reply from 10.244.1.5:53)".
func (f Flow) String() string {
	return strings.ToLower(string(f.Protocol)) + " " + f.Orig.Src.String() + " -> " + f.Orig.Dst.String() +
		" (reply from " + f.Reply.Src.String() + ")"
}

// NodeSnapshot is what the kernel of one node (one netns) holds.
type NodeSnapshot struct {
	Routes []Route
	Links  []Link
	Flows  []Flow
	// ConntrackUnavailable, when set, says why Flows could not be read.
	ConntrackUnavailable string
	// Warnings are things the fetcher could not read (never fatal).
	Warnings []string
}

// LocalAddrs returns every address configured on the node's links.
func (s NodeSnapshot) LocalAddrs() map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, l := range s.Links {
		for _, p := range l.Addrs {
			out[p.Addr().Unmap()] = true
		}
	}
	return out
}

// NodeInfo is what netdrift needs to know about a Node object.
type NodeInfo struct {
	Name     string
	PodCIDRs []netip.Prefix
	// Addresses are the node's own addresses (InternalIP, ExternalIP) and
	// tunnel endpoints CNIs publish in annotations; routes to the node's pods
	// use one of them as gateway.
	Addresses []netip.Addr
	Ready     bool
	// ReadySince is the last transition time of the Ready condition: since
	// when the node is Ready, or NotReady. Zero when the node has no condition.
	ReadySince time.Time
}

// PodInfo is what netdrift needs to know about a Pod.
type PodInfo struct {
	Namespace, Name string
	NodeName        string
	IPs             []netip.Addr
	HostNetwork     bool
	// Terminating: the pod has a deletion timestamp but still exists.
	Terminating bool
	// Deleted: the pod object is gone; callers may keep recently deleted
	// pods so findings can name the previous owner of an address.
	Deleted bool
}

// String returns "namespace/name".
func (p PodInfo) String() string { return p.Namespace + "/" + p.Name }

// EndpointInfo is one endpoint of one EndpointSlice.
type EndpointInfo struct {
	Service  ServicePort // namespace and name; Port and Protocol empty
	Slice    string
	Addr     netip.Addr
	NodeName string
	Ready    bool
	Serving  bool
}
