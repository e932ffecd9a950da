package rst

import (
	"net/netip"

	"github.com/netdrift/netdrift/internal/model"
)

// DesiredServices looks addresses up in the endpoints of desired frontends
// by a scan of every one: for tests that hold a desired state instead of
// the agent's index.
type DesiredServices func() map[model.Frontend]model.Verdict

// EndpointsOf implements Services.
func (d DesiredServices) EndpointsOf(addrs map[netip.Addr]string) map[netip.Addr]map[uint16]EndpointRef {
	return refsByPort(scanEndpoints(d(), addrs), addrs)
}

// ServicesOf maps addresses to the (first by name) service they back.
func (d DesiredServices) ServicesOf(addrs map[netip.Addr]string) map[netip.Addr]model.ServiceName {
	out := map[netip.Addr]model.ServiceName{}
	for a, refs := range d.EndpointsOf(addrs) {
		if svc := primaryService(refs); !svc.IsZero() {
			out[a] = svc
		}
	}
	return out
}

// scanEndpoints collects the endpoints at addrs of every desired frontend.
func scanEndpoints(desired map[model.Frontend]model.Verdict, addrs map[netip.Addr]string) map[netip.Addr][]model.ServiceEndpoint {
	out := map[netip.Addr][]model.ServiceEndpoint{}
	for _, v := range desired {
		for _, e := range v.Endpoints {
			if a := e.Addr.Addr().Unmap(); hasKey(addrs, a) {
				out[a] = append(out[a], model.ServiceEndpoint{Service: v.Service, Addr: e.Addr, Ready: e.Ready, Terminating: e.Terminating})
			}
		}
	}
	return out
}

func hasKey(m map[netip.Addr]string, a netip.Addr) bool {
	_, ok := m[a]
	return ok
}
