package agent

import (
	"net/netip"
	"slices"

	"github.com/netdrift/netdrift/internal/model"
)

// endpointIndex is the desired state's endpoints on this node by address:
// which service ports a pod address backs, on which port, found by a lookup
// per address rather than a scan of every desired frontend. It holds the
// endpoints whose node is this one, or unknown (an EndpointSlice without
// nodeName), and is updated per changed service, as mergedDesired is. An
// address backs one service port in the common case, so each holds a short
// slice rather than a map of its own. Its fields are changed only by its
// methods.
type endpointIndex struct {
	node   string
	byAddr map[netip.Addr][]model.ServiceEndpoint
}

// sameEndpoint reports whether e is the endpoint of service sp on port.
func sameEndpoint(e model.ServiceEndpoint, sp model.ServicePort, port uint16) bool {
	return e.Service == sp && e.Addr.Port() == port
}

// replace swaps a service's desired frontends prev for next.
func (x *endpointIndex) replace(prev, next map[model.Frontend]model.Verdict) {
	for _, v := range prev {
		for _, e := range v.Endpoints {
			a, port := e.Addr.Addr().Unmap(), e.Addr.Port()
			es := slices.DeleteFunc(x.byAddr[a], func(o model.ServiceEndpoint) bool { return sameEndpoint(o, v.Service, port) })
			if len(es) == 0 {
				delete(x.byAddr, a)
			} else {
				x.byAddr[a] = es
			}
		}
	}
	for _, v := range next {
		for _, e := range v.Endpoints {
			if e.NodeName != "" && e.NodeName != x.node {
				continue
			}
			x.put(e.Addr.Addr().Unmap(), model.ServiceEndpoint{Service: v.Service, Addr: e.Addr,
				Ready: e.Ready, Terminating: e.Terminating})
		}
	}
}

// put sets one endpoint of address a, replacing the same service port's.
func (x *endpointIndex) put(a netip.Addr, se model.ServiceEndpoint) {
	if x.byAddr == nil {
		x.byAddr = map[netip.Addr][]model.ServiceEndpoint{}
	}
	es := x.byAddr[a]
	if i := slices.IndexFunc(es, func(o model.ServiceEndpoint) bool { return sameEndpoint(o, se.Service, se.Addr.Port()) }); i >= 0 {
		es[i] = se
		return
	}
	x.byAddr[a] = append(es, se)
}

// rebuild starts over from every service's desired state, for node. The
// map is sized for every endpoint at once: at start-up, when the agent's
// memory peaks, growing it step by step would leave its smaller tables as
// garbage.
func (x *endpointIndex) rebuild(node string, bySvc map[model.ServiceName]map[model.Frontend]model.Verdict) {
	n := 0
	for _, fs := range bySvc {
		for _, v := range fs {
			n += len(v.Endpoints)
		}
	}
	x.node, x.byAddr = node, make(map[netip.Addr][]model.ServiceEndpoint, n)
	for _, fs := range bySvc {
		x.replace(nil, fs)
	}
}

// lookup returns the endpoints of each of ips that has any (copies).
func (x *endpointIndex) lookup(ips []netip.Addr) map[netip.Addr][]model.ServiceEndpoint {
	out := map[netip.Addr][]model.ServiceEndpoint{}
	for _, ip := range ips {
		if es := x.byAddr[ip.Unmap()]; len(es) > 0 {
			out[ip] = slices.Clone(es)
		}
	}
	return out
}
