// Package nodecheck holds netdrift's node-level staleness rules: routes,
// links and conntrack flows left behind when pods, nodes or backends go away,
// and endpoints that sit on vanished nodes. Everything here is pure: the
// kernel is read by internal/datapath (NodeState) and the API by
// internal/watch; both translate into the small types below.
package nodecheck

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/netdrift/netdrift/internal/model"
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
	Protocol model.Protocol
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
	Service  model.ServicePort // namespace and name; Port and Protocol empty
	Slice    string
	Addr     netip.Addr
	NodeName string
	Ready    bool
	Serving  bool
}

// RouteMode says whether this node's CNI installs one route per node podCIDR.
type RouteMode string

const (
	RouteModeAuto    RouteMode = "auto"
	RouteModePerNode RouteMode = "per-node"
	RouteModeNone    RouteMode = "none"
)

// ParseRouteMode accepts auto, per-node and none ("" means auto).
func ParseRouteMode(s string) (RouteMode, error) {
	switch RouteMode(s) {
	case "", RouteModeAuto:
		return RouteModeAuto, nil
	case RouteModePerNode, RouteModeNone:
		return RouteMode(s), nil
	}
	return "", &ConfigError{Field: "route-mode", Value: s, Want: "auto, per-node or none"}
}

// ConfigError is a bad setting.
type ConfigError struct{ Field, Value, Want string }

func (e *ConfigError) Error() string {
	return "invalid " + e.Field + " " + `"` + e.Value + `"` + ": want " + e.Want
}

// DefaultNodeGoneAfter is how long a node may be NotReady before its
// endpoints count as being on a missing node.
const DefaultNodeGoneAfter = 5 * time.Minute

// DefaultIPVSDevice is the dummy device kube-proxy's IPVS mode binds VIPs to.
const DefaultIPVSDevice = "kube-ipvs0"

// Config holds the settings of the node rules.
type Config struct {
	// ClusterCIDRs is the cluster's pod network. Empty: inferred from node
	// podCIDRs (each widened to at most 8 bits shorter), or local pod IPs.
	ClusterCIDRs  []netip.Prefix
	RouteMode     RouteMode     // "" = auto
	NodeGoneAfter time.Duration // 0 = DefaultNodeGoneAfter
	IPVSDevice    string        // "" = DefaultIPVSDevice
	// ExtraGateways are routers that legitimately appear as gateways of pod
	// routes (e.g. a top-of-rack BGP peer with next-hop-self).
	ExtraGateways []netip.Addr
}

func (c Config) nodeGoneAfter() time.Duration {
	if c.NodeGoneAfter <= 0 {
		return DefaultNodeGoneAfter
	}
	return c.NodeGoneAfter
}

func (c Config) ipvsDevice() string {
	if c.IPVSDevice == "" {
		return DefaultIPVSDevice
	}
	return c.IPVSDevice
}

// Inputs is everything the rules look at.
type Inputs struct {
	// NodeName is the node the snapshot was taken on.
	NodeName string
	// Nodes are all Node objects. Empty: node rules are skipped (RBAC, not synced).
	Nodes []NodeInfo
	// Pods are the pods of NodeName (pods of other nodes are ignored), from
	// a synced cache: a missing pod makes its interface an orphan.
	Pods []PodInfo
	// Endpoints are all EndpointSlice endpoints of the cluster.
	Endpoints []EndpointInfo
	// Desired is what kube-proxy must program on this node; nil skips
	// the conntrack rule.
	Desired map[model.Frontend]model.Verdict
	// ServiceIPs are the IPs of every existing Service (cluster, external,
	// load-balancer IPs); used only when ServicesKnown.
	ServiceIPs    []netip.Addr
	ServicesKnown bool
	// Snapshot is this node's kernel state; nil checks only cluster-scope rules.
	Snapshot *NodeSnapshot
}

// RouteDecision is the route mode used for one address family, and why.
type RouteDecision struct {
	Family model.IPFamily
	Mode   RouteMode
	Reason string
}

// Info says what the rules looked at and decided.
type Info struct {
	PodNetwork       []netip.Prefix
	PodNetworkSource string // "cluster-cidr", "inferred from node podCIDRs", "inferred from pod IPs", ""
	RouteModes       []RouteDecision
	// StaleConntrack counts stale conntrack entries per protocol (TCP and UDP always present).
	StaleConntrack    map[model.Protocol]int
	RoutesChecked     int
	LinksChecked      int
	LinksUnattributed int // pod interfaces whose pod addresses could not be learned
	FlowsChecked      int
	// Skipped lists rules that did not run, with the reason.
	Skipped []string
}
