// Package model holds the domain types shared by every netdrift package.
// It imports neither client-go nor netlink: sources translate into these types
// at their boundary (docs/architecture.md, "Domain types").
package model

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Protocol is a Service port protocol as the API spells it: TCP, UDP or SCTP.
type Protocol string

const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// IPFamily is the address family of a frontend.
type IPFamily string

const (
	IPv4 IPFamily = "IPv4"
	IPv6 IPFamily = "IPv6"
)

// FamilyOf returns the family of an address.
func FamilyOf(a netip.Addr) IPFamily {
	if a.Is4() || a.Is4In6() {
		return IPv4
	}
	return IPv6
}

// ServiceName is a Service's identity: its namespace and name. It is the
// one key of a service wherever one crosses a package boundary (as
// kube-proxy's types.NamespacedName is); its text form is "namespace/name".
type ServiceName struct {
	Namespace string
	Name      string
}

// IsZero reports whether the service is unknown.
func (s ServiceName) IsZero() bool { return s.Namespace == "" && s.Name == "" }

// String returns "namespace/name".
func (s ServiceName) String() string { return s.Namespace + "/" + s.Name }

// ParseServiceName reads "namespace/name"; false when s has no "/" or an
// empty part.
func ParseServiceName(s string) (ServiceName, bool) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return ServiceName{}, false
	}
	return ServiceName{Namespace: ns, Name: name}, true
}

// ServicePort names one port of one Service, as kube-proxy does ("ns/name:port").
type ServicePort struct {
	ServiceName
	Port     string // the Service port's name; "" for an unnamed single port
	Protocol Protocol
}

// Service returns "namespace/name".
func (s ServicePort) Service() string { return s.ServiceName.String() }

// String returns "namespace/name:port" ("namespace/name" for an unnamed
// port), the form kube-proxy puts in rule comments.
func (s ServicePort) String() string {
	if s.IsZero() {
		return ""
	}
	if s.Port == "" { // kube-proxy writes an unnamed single port as "ns/name"
		return s.Service()
	}
	return s.Service() + ":" + s.Port
}

// FrontendKind says how traffic reaches a frontend.
type FrontendKind string

const (
	ClusterIP    FrontendKind = "cluster_ip"
	NodePort     FrontendKind = "node_port"
	ExternalIP   FrontendKind = "external_ip"
	LoadBalancer FrontendKind = "load_balancer"
)

// Frontend is an address clients send Service traffic to. It is the key of
// Desired and Observed: the same frontend in both is compared. For node ports
// IP is the zero Addr ("any local address") and Family tells v4 from v6.
type Frontend struct {
	IP       netip.Addr
	Port     uint16
	Protocol Protocol
	Kind     FrontendKind
	Family   IPFamily
}

// NewFrontend builds a frontend for an IP (Family derived from it).
func NewFrontend(ip netip.Addr, port uint16, proto Protocol, kind FrontendKind) Frontend {
	ip = ip.Unmap()
	return Frontend{IP: ip, Port: port, Protocol: proto, Kind: kind, Family: FamilyOf(ip)}
}

// NewNodePort builds a node-port frontend of the given family.
func NewNodePort(port uint16, proto Protocol, fam IPFamily) Frontend {
	return Frontend{Port: port, Protocol: proto, Kind: NodePort, Family: fam}
}

// String renders "ip:port" ("[ip]:port" for IPv6) or "*:port" for node ports.
func (f Frontend) String() string {
	if !f.IP.IsValid() {
		return "*:" + strconv.Itoa(int(f.Port))
	}
	return netip.AddrPortFrom(f.IP, f.Port).String()
}

// Less orders frontends for stable output.
func (f Frontend) Less(o Frontend) bool {
	if f.Family != o.Family {
		return f.Family < o.Family
	}
	if c := f.IP.Compare(o.IP); c != 0 {
		return c < 0
	}
	if f.Port != o.Port {
		return f.Port < o.Port
	}
	if f.Protocol != o.Protocol {
		return f.Protocol < o.Protocol
	}
	return f.Kind < o.Kind
}

// Action is what a frontend does with a new connection.
type Action string

const (
	Forward Action = "forward" // DNAT to one of Backends
	Reject  Action = "reject"  // no endpoints: ICMP unreachable / TCP RST
	Drop    Action = "drop"    // no local endpoints under a Local policy, or firewalled
)

// Endpoint is one endpoint of a service port as the API describes it, with
// the reason it is (or is not) a desired backend on this node.
type Endpoint struct {
	Addr        netip.AddrPort
	NodeName    string
	Zone        string
	Ready       bool
	Serving     bool
	Terminating bool
	Included    bool
	Reason      string // e.g. "ready", "serving-terminating fallback", "not ready", "not local (Local policy)"
}

// Verdict is what a frontend does on this node: desired (from the API) or
// observed (from the kernel).
type Verdict struct {
	Service  ServicePort
	Action   Action
	Backends []netip.AddrPort // sorted, unique; only for Forward
	// Endpoints (desired only): every endpoint known for the service port,
	// included or not, with the reason; they explain stale backends.
	Endpoints []Endpoint
	// Uncertain, when set, says why netdrift cannot tell what kube-proxy
	// would program; such a frontend is never reported stale.
	Uncertain string
	// Evidence: observed -> chain names and rule text; desired -> why.
	Evidence []string
}

// ServiceEndpoint is an address's part in a service port as its
// EndpointSlice says, whatever frontend of the service port it is seen by.
type ServiceEndpoint struct {
	Service     ServicePort
	Addr        netip.AddrPort
	Ready       bool
	Terminating bool
}

// Equal reports whether v and w are the same verdict: same service port,
// action, backends, endpoints, uncertainty and evidence (a nil and an empty
// list are equal). It is the one equality of verdicts: whether a desired
// state changed, whether a frontend must be compared again, whether a
// reader's evaluation differs from the last.
func (v Verdict) Equal(w Verdict) bool {
	return v.Service == w.Service && v.Action == w.Action && v.Uncertain == w.Uncertain &&
		slices.Equal(v.Backends, w.Backends) && slices.Equal(v.Endpoints, w.Endpoints) &&
		slices.Equal(v.Evidence, w.Evidence)
}

// HasBackend reports whether b is one of the verdict's backends.
func (v Verdict) HasBackend(b netip.AddrPort) bool {
	i := sort.Search(len(v.Backends), func(i int) bool { return !AddrPortLess(v.Backends[i], b) })
	return i < len(v.Backends) && v.Backends[i] == b
}

// Endpoint returns the endpoint record for a backend address, if known.
func (v Verdict) Endpoint(b netip.AddrPort) (Endpoint, bool) {
	for _, e := range v.Endpoints {
		if e.Addr == b {
			return e, true
		}
	}
	return Endpoint{}, false
}

// AddrPortCompare orders backends as AddrPortLess does, for slices.SortFunc.
func AddrPortCompare(a, b netip.AddrPort) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return int(a.Port()) - int(b.Port())
}

// AddrPortLess orders backends.
func AddrPortLess(a, b netip.AddrPort) bool { return AddrPortCompare(a, b) < 0 }

// SortBackends sorts and de-duplicates a backend list in place.
func SortBackends(bs []netip.AddrPort) []netip.AddrPort {
	sort.Slice(bs, func(i, j int) bool { return AddrPortLess(bs[i], bs[j]) })
	out := bs[:0]
	for i, b := range bs {
		if i == 0 || b != bs[i-1] {
			out = append(out, b)
		}
	}
	return out
}

// Datapath modes, named the same in flags, JSON, metrics and docs.
const (
	ModeIPTables = "iptables"
	ModeNFTables = "nftables"
	ModeIPVS     = "ipvs"
	ModeCilium   = "cilium" // Cilium's kube-proxy replacement: eBPF service maps
	ModeNone     = "none"
)

// Desired is what kube-proxy must program on one node. Its verdicts are
// read-only: the frontends of one service port share their Backends and
// Endpoints arrays (clipped, so an append copies).
type Desired struct {
	Node      string
	Frontends map[Frontend]Verdict
}

// Observed is what the kernel holds on one node. A reader may hand out the
// same Observed again while nothing changed: callers never modify one.
type Observed struct {
	Datapath  string // ModeIPTables, ModeNFTables, ModeIPVS, ModeCilium, ModeNone
	Frontends map[Frontend]Verdict
	// Warnings are things the reader saw but could not map (never fatal).
	Warnings []string
	// Version, when not zero, identifies the content: a reader gives two
	// reads the same Version only when they hold the same state, so a
	// caller may skip comparing again. Zero: unknown, compare.
	Version uint64
	// Since and Changed, when Changed is not nil, say that this state differs
	// from the reader's state of version Since only at the Changed frontends
	// (a change event re-evaluated those): a caller that compared version
	// Since compares only these.
	Since   uint64
	Changed map[Frontend]bool
	// HeldSince, when not zero, is when the kernel last changed the state
	// this read found (Cilium's maps, whose writes the kernel stamps): the
	// state has held since then, which dates the changes the read shows
	// programmed. Zero: the reader cannot tell; the read dates them.
	HeldSince time.Time
}

// SortedFrontends returns the keys of m in a stable order.
func SortedFrontends(m map[Frontend]Verdict) []Frontend {
	out := make([]Frontend, 0, len(m))
	for f := range m {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// ParseProtocol accepts tcp/udp/sctp in any case.
func ParseProtocol(s string) (Protocol, error) {
	switch s {
	case "tcp", "TCP":
		return TCP, nil
	case "udp", "UDP":
		return UDP, nil
	case "sctp", "SCTP":
		return SCTP, nil
	}
	return "", fmt.Errorf("unknown protocol %q", s)
}

// MarkDiffering marks in into every frontend present in only one of old and
// cur, or whose verdicts are not Equal.
func MarkDiffering(into map[Frontend]bool, old, cur map[Frontend]Verdict) {
	for fe, v := range cur {
		if o, ok := old[fe]; !ok || !o.Equal(v) {
			into[fe] = true
		}
	}
	for fe := range old {
		if _, ok := cur[fe]; !ok {
			into[fe] = true
		}
	}
}
