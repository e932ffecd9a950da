package rst

import (
	"net/netip"

	"github.com/netdrift/netdrift/internal/model"
)

// Services tells the pipeline which service a watched address is an
// endpoint of.
type Services interface {
	// ServicesOf takes watched addresses with their pod's namespace and
	// returns, for those that are endpoints of a service of that namespace,
	// the service's name.
	ServicesOf(addrs map[netip.Addr]string) map[netip.Addr]string
}

// DesiredServices looks addresses up in the endpoints of the desired
// frontends (the agent's view of the EndpointSlices).
type DesiredServices func() map[model.Frontend]model.Verdict

// ServicesOf implements Services.
func (d DesiredServices) ServicesOf(addrs map[netip.Addr]string) map[netip.Addr]string {
	return servicesOf(d(), addrs)
}

func servicesOf(desired map[model.Frontend]model.Verdict, addrs map[netip.Addr]string) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, v := range desired {
		for _, e := range v.Endpoints {
			a := e.Addr.Addr().Unmap()
			if ns, ok := addrs[a]; ok && ns == v.Service.Namespace {
				out[a] = v.Service.Name
			}
		}
	}
	return out
}
