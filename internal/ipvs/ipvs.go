// Package ipvs reads kube-proxy's IPVS state: virtual servers (VIP:port/proto)
// and their real servers, plus the VIPs bound on the dummy link kube-ipvs0.
//
// Two fetch paths produce the same Table: generic netlink (github.com/moby/ipvs,
// the library kube-proxy itself uses) and the text of `ipvsadm -Sn`
// (ParseSave). Build turns a Table into model.Observed. Nothing here changes
// kernel state.
package ipvs

import (
	"net/netip"

	"github.com/netdrift/netdrift/internal/model"
)

// DefaultLink is the dummy link kube-proxy binds its IPVS VIPs on.
const DefaultLink = "kube-ipvs0"

// Forwarding methods of a real server, as ipvsadm names them.
const (
	ForwardMasq   = "masq"   // -m: NAT, what kube-proxy uses
	ForwardLocal  = "local"  // the real server is a local address
	ForwardTunnel = "tunnel" // -i: IP-in-IP
	ForwardRoute  = "route"  // -g: direct routing (gatewaying)
	ForwardBypass = "bypass"
)

// VirtualServer is one IPVS service. Either Addr/Protocol or FWMark is set.
type VirtualServer struct {
	Addr      netip.AddrPort
	Protocol  model.Protocol
	FWMark    uint32 // non-zero for firewall-mark services (kube-proxy uses none)
	Family    model.IPFamily
	Scheduler string
	// Persistent is set for session affinity (ipvsadm -p); Timeout in seconds.
	Persistent bool
	Timeout    uint32
	Reals      []RealServer
}

// RealServer is one destination of a virtual server.
type RealServer struct {
	Addr    netip.AddrPort
	Weight  int
	Forward string
	// Active and Inactive connection counts (netlink only; zero from text).
	Active, Inactive int
}

// Table is the raw IPVS state of one network namespace.
type Table struct {
	Services []VirtualServer
	// LinkAddrs are the addresses bound on kube-ipvs0; nil when unknown
	// (ipvsadm text), empty when the link exists with no address.
	LinkAddrs []netip.Addr
	// LinkFound reports whether kube-ipvs0 exists (netlink only).
	LinkFound bool
}

// Options tell Build what IPVS alone cannot: the kind of each VIP and which
// ports are node ports. Prepared from the API's hints (OptionsFor).
type Options struct {
	// Kinds maps a VIP to its frontend kind (cluster_ip, external_ip,
	// load_balancer). Unknown VIPs are taken as cluster_ip.
	Kinds map[netip.Addr]model.FrontendKind
	// NodePorts is the set of known node ports; a virtual server on such a
	// port whose address is not a known VIP (and not bound on kube-ipvs0) is
	// a node port, and becomes model.NewNodePort.
	NodePorts map[PortKey]bool
	// Services names the service port of a frontend, when known, so the
	// observed verdict carries it (IPVS itself holds no names).
	Services map[model.Frontend]model.ServicePort
}

// PortKey is a port and protocol.
type PortKey struct {
	Port     uint16
	Protocol model.Protocol
}

// OptionsFor prepares the API's hints for Build.
func OptionsFor(h model.Hints) Options {
	o := Options{
		Kinds:     map[netip.Addr]model.FrontendKind{},
		NodePorts: map[PortKey]bool{},
		Services:  map[model.Frontend]model.ServicePort{},
	}
	for f, sp := range h.Frontends {
		if f.Kind == model.NodePort {
			o.NodePorts[PortKey{f.Port, f.Protocol}] = true
		} else if f.IP.IsValid() {
			o.Kinds[f.IP] = f.Kind
		}
		if !sp.IsZero() {
			o.Services[f] = sp
		}
	}
	return o
}
