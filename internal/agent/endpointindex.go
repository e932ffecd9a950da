package agent

import (
	"net/netip"

	"github.com/netdrift/netdrift/internal/model"
)

// endpointIndex is the desired state's endpoints on this node by address:
// which service ports a pod address backs, on which port, found by a lookup
// per address rather than a scan of every desired frontend. It holds the
// endpoints whose node is this one, or unknown (an EndpointSlice without
// nodeName), and is updated per changed service, as mergedDesired is. Its
// fields are changed only by its methods.
type endpointIndex struct {
	node   string
	byAddr map[netip.Addr]map[endpointKey]model.ServiceEndpoint
}

// endpointKey is one endpoint of an address: a service port and the
// endpoint's port.
type endpointKey struct {
	service model.ServicePort
	port    uint16
}

// replace swaps a service's desired frontends prev for next.
func (x *endpointIndex) replace(prev, next map[model.Frontend]model.Verdict) {
	for _, v := range prev {
		for _, e := range v.Endpoints {
			a := e.Addr.Addr().Unmap()
			if m := x.byAddr[a]; m != nil {
				delete(m, endpointKey{v.Service, e.Addr.Port()})
				if len(m) == 0 {
					delete(x.byAddr, a)
				}
			}
		}
	}
	for _, v := range next {
		for _, e := range v.Endpoints {
			if e.NodeName != "" && e.NodeName != x.node {
				continue
			}
			a := e.Addr.Addr().Unmap()
			m := x.byAddr[a]
			if m == nil {
				if x.byAddr == nil {
					x.byAddr = map[netip.Addr]map[endpointKey]model.ServiceEndpoint{}
				}
				m = map[endpointKey]model.ServiceEndpoint{}
				x.byAddr[a] = m
			}
			m[endpointKey{v.Service, e.Addr.Port()}] = model.ServiceEndpoint{Service: v.Service, Addr: e.Addr,
				Ready: e.Ready, Terminating: e.Terminating}
		}
	}
}

// rebuild starts over from every service's desired state, for node.
func (x *endpointIndex) rebuild(node string, bySvc map[model.ServiceName]map[model.Frontend]model.Verdict) {
	x.node, x.byAddr = node, nil
	for _, fs := range bySvc {
		x.replace(nil, fs)
	}
}

// lookup returns the endpoints of each of ips that has any (copies).
func (x *endpointIndex) lookup(ips []netip.Addr) map[netip.Addr][]model.ServiceEndpoint {
	out := map[netip.Addr][]model.ServiceEndpoint{}
	for _, ip := range ips {
		for _, e := range x.byAddr[ip.Unmap()] {
			out[ip] = append(out[ip], e)
		}
	}
	return out
}
