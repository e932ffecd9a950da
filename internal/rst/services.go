package rst

import (
	"net/netip"

	"github.com/netdrift/netdrift/internal/model"
)

// Services tells the pipeline which services a watched address is an
// endpoint of, on which ports.
type Services interface {
	// EndpointsOf takes watched addresses with their pod's namespace and
	// returns, for those that are endpoints of a service of that namespace,
	// the endpoint per target port.
	EndpointsOf(addrs map[netip.Addr]string) map[netip.Addr]map[uint16]EndpointRef
}

// EndpointIndex is an index of the desired endpoints by address (the
// agent's EndpointsOf): a lookup per watched address.
type EndpointIndex interface {
	EndpointsOf(ips []netip.Addr) map[netip.Addr][]model.ServiceEndpoint
}

// IndexedServices looks watched addresses up in the index it returns (a
// function: the agent is built after the pipeline its watch feeds).
type IndexedServices func() EndpointIndex

// EndpointsOf implements Services.
func (f IndexedServices) EndpointsOf(addrs map[netip.Addr]string) map[netip.Addr]map[uint16]EndpointRef {
	ips := make([]netip.Addr, 0, len(addrs))
	for a := range addrs {
		ips = append(ips, a)
	}
	return refsByPort(f().EndpointsOf(ips), addrs)
}

// refsByPort keeps the endpoints of a service of each address's own
// namespace, one per target port: the first service by name, ready when
// any of them is ready and not terminating.
func refsByPort(eps map[netip.Addr][]model.ServiceEndpoint, addrs map[netip.Addr]string) map[netip.Addr]map[uint16]EndpointRef {
	out := map[netip.Addr]map[uint16]EndpointRef{}
	for a, list := range eps {
		ns, ok := addrs[a]
		if !ok {
			continue
		}
		for _, e := range list {
			if e.Service.Namespace != ns {
				continue
			}
			m := out[a]
			if m == nil {
				m = map[uint16]EndpointRef{}
				out[a] = m
			}
			port := e.Addr.Port()
			r, seen := m[port]
			if !seen || serviceLess(e.Service.ServiceName, r.Service) {
				r.Service = e.Service.ServiceName
			}
			r.Ready = r.Ready || (e.Ready && !e.Terminating)
			m[port] = r
		}
	}
	return out
}
