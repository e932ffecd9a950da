package ipvs

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// Evidence suffixes, stable for tests and tools.
const (
	drainingNote = " (weight 0: draining, not a programmed backend)"
	noRealsNote  = "no real server with weight > 0: service without endpoints"
	unboundNote  = "VIP not bound on " + DefaultLink + ": the node does not accept traffic for it"
)

// Build turns the raw IPVS table into the observed model. Every virtual
// server becomes a frontend: real servers with weight > 0 are its backends;
// weight-0 ones (draining) stay in Evidence only; none at all -> reject.
func Build(t Table, o Options) model.Observed {
	obs := model.Observed{Datapath: model.ModeIPVS, Frontends: map[model.Frontend]model.Verdict{}}
	bound := addrSet(t.LinkAddrs)
	sets := map[model.Frontend][]string{} // backend set per contributing virtual server
	for _, vs := range sortedServers(t.Services) {
		if vs.FWMark != 0 {
			obs.Warnings = append(obs.Warnings, "firewall-mark virtual server ignored: "+vs.Rule())
			continue
		}
		fe := frontendOf(vs, o, bound)
		v := obs.Frontends[fe]
		v.Evidence = append(v.Evidence, vs.Rule())
		var own []string
		for _, r := range sortedReals(vs.Reals) {
			if r.Weight <= 0 {
				v.Evidence = append(v.Evidence, vs.RealRule(r)+drainingNote)
				continue
			}
			v.Evidence = append(v.Evidence, vs.RealRule(r))
			v.Backends = append(v.Backends, r.Addr)
			own = append(own, r.Addr.String())
		}
		if fe.Kind != model.NodePort && t.LinkAddrs != nil && !bound[vs.Addr.Addr()] {
			v.Evidence = append(v.Evidence, unboundNote)
			obs.Warnings = append(obs.Warnings, vs.ID()+": "+unboundNote)
		}
		sets[fe] = append(sets[fe], strings.Join(own, ","))
		obs.Frontends[fe] = v
	}
	for fe, v := range obs.Frontends {
		obs.Frontends[fe] = finish(fe, v, o)
		if disagree(sets[fe]) {
			obs.Warnings = append(obs.Warnings, fmt.Sprintf(
				"node port %s/%s: virtual servers on node addresses have different real servers", fe, fe.Protocol))
		}
	}
	sort.Strings(obs.Warnings)
	return obs
}

func finish(fe model.Frontend, v model.Verdict, o Options) model.Verdict {
	v.Backends = model.SortBackends(v.Backends)
	v.Action = model.Forward
	if len(v.Backends) == 0 {
		v.Backends = nil
		v.Action = model.Reject
		v.Evidence = append(v.Evidence, noRealsNote)
	}
	if sp, ok := o.Services[fe]; ok {
		v.Service = sp
	}
	return v
}

// frontendOf maps a virtual server to its frontend: a known VIP keeps its
// kind; a node-port-numbered server on an address not bound on kube-ipvs0
// is a node port; anything else is taken as a cluster IP.
func frontendOf(vs VirtualServer, o Options, bound map[netip.Addr]bool) model.Frontend {
	ip := vs.Addr.Addr().Unmap()
	if k, ok := o.Kinds[ip]; ok && k != model.NodePort {
		return model.NewFrontend(ip, vs.Addr.Port(), vs.Protocol, k)
	}
	if o.NodePorts[PortKey{vs.Addr.Port(), vs.Protocol}] && !bound[ip] {
		return model.NewNodePort(vs.Addr.Port(), vs.Protocol, model.FamilyOf(ip))
	}
	return model.NewFrontend(ip, vs.Addr.Port(), vs.Protocol, model.ClusterIP)
}

func disagree(sets []string) bool {
	for _, s := range sets {
		if s != sets[0] {
			return true
		}
	}
	return false
}

func addrSet(as []netip.Addr) map[netip.Addr]bool {
	m := make(map[netip.Addr]bool, len(as))
	for _, a := range as {
		m[a.Unmap()] = true
	}
	return m
}

func sortedServers(in []VirtualServer) []VirtualServer {
	out := append([]VirtualServer(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return serverLess(out[i], out[j]) })
	return out
}

func serverLess(a, b VirtualServer) bool {
	if a.FWMark != b.FWMark {
		return a.FWMark < b.FWMark
	}
	if c := a.Addr.Addr().Compare(b.Addr.Addr()); c != 0 {
		return c < 0
	}
	if a.Addr.Port() != b.Addr.Port() {
		return a.Addr.Port() < b.Addr.Port()
	}
	return a.Protocol < b.Protocol
}

func sortedReals(in []RealServer) []RealServer {
	out := append([]RealServer(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return model.AddrPortLess(out[i].Addr, out[j].Addr) })
	return out
}

// IdleVIPs returns the addresses bound on kube-ipvs0 that no virtual server
// uses (for example VIPs of deleted services), sorted.
func (t Table) IdleVIPs() []netip.Addr {
	used := map[netip.Addr]bool{}
	for _, vs := range t.Services {
		used[vs.Addr.Addr().Unmap()] = true
	}
	var out []netip.Addr
	for _, a := range t.LinkAddrs {
		if !used[a.Unmap()] {
			out = append(out, a.Unmap())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}
