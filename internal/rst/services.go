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

// DesiredServices looks addresses up in the endpoints of the desired
// frontends (the agent's view of the EndpointSlices).
type DesiredServices func() map[model.Frontend]model.Verdict

// EndpointsOf implements Services.
func (d DesiredServices) EndpointsOf(addrs map[netip.Addr]string) map[netip.Addr]map[uint16]EndpointRef {
	return endpointsOf(d(), addrs)
}

// ServicesOf maps addresses to the (first by name) service they back.
func (d DesiredServices) ServicesOf(addrs map[netip.Addr]string) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for a, refs := range endpointsOf(d(), addrs) {
		if svc := primaryService(refs); svc != "" {
			out[a] = svc
		}
	}
	return out
}

func endpointsOf(desired map[model.Frontend]model.Verdict, addrs map[netip.Addr]string) map[netip.Addr]map[uint16]EndpointRef {
	out := map[netip.Addr]map[uint16]EndpointRef{}
	for _, v := range desired {
		for _, e := range v.Endpoints {
			a := e.Addr.Addr().Unmap()
			ns, ok := addrs[a]
			if !ok || ns != v.Service.Namespace {
				continue
			}
			m := out[a]
			if m == nil {
				m = map[uint16]EndpointRef{}
				out[a] = m
			}
			port := e.Addr.Port()
			r, seen := m[port]
			if !seen || v.Service.Name < r.Service {
				r.Service = v.Service.Name
			}
			r.Ready = r.Ready || (e.Ready && !e.Terminating)
			m[port] = r
		}
	}
	return out
}
