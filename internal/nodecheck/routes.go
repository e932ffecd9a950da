package nodecheck

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// routeRules produces stale_route and missing_route findings.
func routeRules(w *world, s *model.NodeSnapshot, info *Info) []model.Finding {
	if len(w.podNet) == 0 {
		info.Skipped = append(info.Skipped, "stale_route, missing_route: pod network unknown "+
			"(no --cluster-cidr, no node podCIDRs, no pod IPs)")
		return nil
	}
	if len(w.nodes) == 0 {
		info.Skipped = append(info.Skipped, "stale_route, missing_route: no Node objects known")
		return nil
	}
	if w.onlyOwnNode {
		info.Skipped = append(info.Skipped, "stale_route, missing_route: "+ownNodeOnly)
		return nil
	}
	kinds := linkKinds(s.Links)
	info.RouteModes = decideRouteModes(w, s.Routes)
	mode := map[model.IPFamily]RouteMode{}
	for _, d := range info.RouteModes {
		mode[d.Family] = d.Mode
	}
	var out []model.Finding
	for _, r := range s.Routes {
		if !w.podRoute(r, kinds) {
			continue
		}
		info.RoutesChecked++
		if why := w.staleRoute(r, mode[model.FamilyOf(r.Dst.Addr())]); why != "" {
			out = append(out, model.Finding{
				Kind:     model.StaleRoute,
				Subject:  r.String(),
				Detail:   "Route " + r.String() + " " + why + ".",
				Evidence: w.routeEvidence(r),
			})
		}
	}
	return append(out, missingRoutes(w, s.Routes, mode)...)
}

func linkKinds(ls []model.Link) map[string]string {
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.Name] = l.Kind
	}
	return m
}

func mainTable(r model.Route) bool { return r.Table == 0 || r.Table == model.MainTable }

// podRoute reports whether r is a route into the pod network that the route
// rules judge: main table, unicast or reject type, not an aggregate of node
// podCIDRs, not the node network, and not a host route onto a pod interface
// (those belong to orphan_link).
func (w *world) podRoute(r model.Route, kinds map[string]string) bool {
	if !mainTable(r) || r.Dst.Bits() == 0 || !(r.Type == model.RouteUnicast || r.Reject()) {
		return false
	}
	if !w.inPodNetwork(r.Dst) || w.aggregate(r.Dst) || w.containsNodeAddr(r.Dst) {
		return false
	}
	if r.Dst.IsSingleIP() && isPodLinkKind(kinds[r.Dev]) {
		return false
	}
	return true
}

func isPodLinkKind(k string) bool { return k == "veth" || k == "netkit" }

// staleRoute says why r is stale, or "" when it is not.
func (w *world) staleRoute(r model.Route, mode RouteMode) string {
	owners := w.overlapNodes(r.Dst)
	if r.Reject() {
		if len(owners) > 0 || w.localPodIn(r.Dst) || r.Protocol == "bird" {
			return ""
		}
		return "discards traffic for a range that is no node's podCIDR and holds no pod of this node " +
			"(left behind by a deleted node or a podCIDR change)"
	}
	for _, h := range r.Hops() {
		if h.Gateway.IsValid() && w.knownGateway(h.Gateway) == "" {
			return "goes via " + h.Gateway.String() + ", which is the address of no existing node " +
				"(typically a deleted node), so traffic to those pods is sent nowhere"
		}
	}
	if mode == RouteModePerNode && len(owners) == 0 && !w.localPodIn(r.Dst) {
		return "matches no existing node's podCIDR and no pod on this node " +
			"(typically left behind by a deleted node)"
	}
	return ""
}

func (w *world) routeEvidence(r model.Route) []string {
	ev := []string{"route: " + r.String()}
	var pn []string
	for _, p := range w.podNet {
		pn = append(pn, p.String())
	}
	ev = append(ev, "pod network: "+strings.Join(pn, ",")+" ("+w.podNetSrc+")")
	if owners := w.overlapNodes(r.Dst); len(owners) > 0 {
		ev = append(ev, "overlaps podCIDR of: "+strings.Join(owners, ","))
	}
	for _, h := range r.Hops() {
		if h.Gateway.IsValid() {
			why := w.knownGateway(h.Gateway)
			if why == "" {
				why = "unknown"
			}
			ev = append(ev, "gateway "+h.Gateway.String()+": "+why)
		}
	}
	return ev
}

// remoteCIDRs returns the podCIDRs of one family owned by live nodes other
// than this one, in input order.
func remoteCIDRs(w *world, fam model.IPFamily) []ownedPrefix {
	var out []ownedPrefix
	for _, o := range w.podCIDRs {
		if o.Node == w.self || model.FamilyOf(o.Prefix.Addr()) != fam {
			continue
		}
		if gone, _ := w.nodeGone(o.Node); gone {
			continue
		}
		out = append(out, o)
	}
	return out
}

func familyHasCIDRs(w *world, fam model.IPFamily) bool {
	for _, o := range w.podCIDRs {
		if model.FamilyOf(o.Prefix.Addr()) == fam {
			return true
		}
	}
	return false
}

// decideRouteModes decides, per address family, whether the CNI routes
// each node's podCIDR (host-gw, flannel vxlan, Cilium/kube-router native
// routing) so a missing one is a finding.
func decideRouteModes(w *world, routes []model.Route) []RouteDecision {
	var out []RouteDecision
	for _, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
		if !familyHasCIDRs(w, fam) {
			continue
		}
		d := RouteDecision{Family: fam}
		remote := remoteCIDRs(w, fam)
		exact := 0
		dsts := unicastDsts(routes)
		for _, o := range remote {
			if dsts[o.Prefix] {
				exact++
			}
		}
		switch {
		case w.cfg.RouteMode == RouteModePerNode || w.cfg.RouteMode == RouteModeNone:
			d.Mode, d.Reason = w.cfg.RouteMode, "set by --route-mode"
		case len(remote) == 0:
			d.Mode, d.Reason = RouteModeNone, "no other live node has an "+string(fam)+" podCIDR"
		case exact > 0 && exact*2 >= len(remote):
			d.Mode = RouteModePerNode
			d.Reason = fmt.Sprintf("%d of %d other nodes' %s podCIDRs have a route of their own "+
				"(host-gw, vxlan or native routing)", exact, len(remote), fam)
		default:
			d.Mode = RouteModeNone
			d.Reason = fmt.Sprintf("only %d of %d other nodes' %s podCIDRs have a route of their own: "+
				"routing is not per node podCIDR (overlay aggregate, eBPF, cloud routes or block IPAM such as Calico)",
				exact, len(remote), fam)
		}
		out = append(out, d)
	}
	return out
}

// unicastDsts returns the destinations of unicast main-table routes.
func unicastDsts(routes []model.Route) map[netip.Prefix]bool {
	m := make(map[netip.Prefix]bool, len(routes))
	for _, r := range routes {
		if mainTable(r) && r.Type == model.RouteUnicast && r.Dst.IsValid() {
			m[r.Dst.Masked()] = true
		}
	}
	return m
}

// covered reports whether a unicast main-table route other than the default
// route reaches all of p: one for p itself or for a prefix containing it.
func covered(dsts map[netip.Prefix]bool, p netip.Prefix) bool {
	for k := p.Bits(); k > 0; k-- {
		if dsts[netip.PrefixFrom(p.Addr(), k).Masked()] {
			return true
		}
	}
	return false
}

func missingRoutes(w *world, routes []model.Route, mode map[model.IPFamily]RouteMode) []model.Finding {
	var out []model.Finding
	dsts := unicastDsts(routes)
	for _, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
		if mode[fam] != RouteModePerNode {
			continue
		}
		for _, o := range remoteCIDRs(w, fam) {
			if covered(dsts, o.Prefix) {
				continue
			}
			out = append(out, model.Finding{
				Kind:    model.MissingRoute,
				Subject: o.Prefix.String() + " (node " + o.Node + ")",
				Detail: "Node " + o.Node + " owns pod CIDR " + o.Prefix.String() +
					" but this node has no route to it, so pods here cannot reach its pods.",
				Evidence: []string{"route mode: per-node", "podCIDR " + o.Prefix.String() + " of node " + o.Node},
			})
		}
	}
	return out
}
