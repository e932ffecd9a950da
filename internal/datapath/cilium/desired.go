package cilium

import (
	"net/netip"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// Semantics are the cilium-agent settings that change which backends a
// frontend gets, relative to kube-proxy's semantics (watch.Expected).
type Semantics struct {
	// ServiceTopology is cilium-agent's enable-service-topology (default
	// off): with it off, Cilium ignores topology hints and traffic
	// distribution, which kube-proxy honours.
	ServiceTopology bool
}

// topologyReason is how watch.Expected marks an endpoint left out by a hint.
const topologyReason = "topology:"

// Desired adjusts a desired state computed with kube-proxy's semantics to
// what Cilium's load balancer programs. Everything else kube-proxy and
// Cilium agree on: ready endpoints, the serving-terminating fallback (Cilium
// parks terminating backends and selects them when no active one is left),
// traffic policy Local (Cilium's external scope holds the local backends).
// (A frontend with no selectable backend gets Cilium's one no-backend
// response whatever the traffic policy, where kube-proxy drops under a
// Local policy: drift's comparison treats reject and drop alike in this
// mode.) The input is not modified.
func Desired(d model.Desired, s Semantics) model.Desired {
	if s.ServiceTopology {
		return d
	}
	out := model.Desired{Node: d.Node, Frontends: make(map[model.Frontend]model.Verdict, len(d.Frontends))}
	for fe, v := range d.Frontends {
		out.Frontends[fe] = Adjust(v, s)
	}
	return out
}

// Adjust is Desired for one verdict.
func Adjust(v model.Verdict, s Semantics) model.Verdict {
	if s.ServiceTopology {
		return v
	}
	return withoutTopology(v)
}

// withoutTopology includes the endpoints a topology hint left out.
func withoutTopology(v model.Verdict) model.Verdict {
	var add []model.Endpoint
	for _, e := range v.Endpoints {
		if !e.Included && strings.HasPrefix(e.Reason, topologyReason) {
			add = append(add, e)
		}
	}
	if len(add) == 0 {
		return v
	}
	eps := make([]model.Endpoint, len(v.Endpoints))
	copy(eps, v.Endpoints)
	bs := append([]netip.AddrPort(nil), v.Backends...)
	for i, e := range eps {
		if !e.Included && strings.HasPrefix(e.Reason, topologyReason) {
			eps[i].Included = true
			eps[i].Reason = "ready (Cilium ignores topology hints: enable-service-topology is off)"
			bs = append(bs, e.Addr)
		}
	}
	v.Endpoints, v.Backends = eps, model.SortBackends(bs)
	if v.Action == model.Drop || v.Action == model.Reject {
		v.Action = model.Forward
	}
	v.Evidence = append(append([]string(nil), v.Evidence...), "Cilium ignores topology hints (enable-service-topology off)")
	return v
}
