package nodecheck

import (
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// linkRules produces orphan_link, link_down and (IPVS) stale_frontend findings.
func linkRules(w *world, in Inputs, s *model.NodeSnapshot, info *Info) []model.Finding {
	hostRoutes, podRoutes := routesByDev(w, s.Routes)
	if len(w.nodes) == 0 {
		info.Skipped = append(info.Skipped, "orphan_link: no Node objects known (cluster state not synced)")
	}
	var out []model.Finding
	for _, l := range s.Links {
		info.LinksChecked++
		if isPodLinkKind(l.Kind) && l.PeerNetnsID >= 0 && len(w.nodes) > 0 {
			f, attributed := orphanLink(w, l, hostRoutes[l.Name])
			if !attributed {
				info.LinksUnattributed++
			}
			if f != nil {
				out = append(out, *f)
			}
		}
		if dsts := podRoutes[l.Name]; len(dsts) > 0 && (l.Down() || anyLinkDown(s.Routes, l.Name)) {
			out = append(out, linkDown(l, dsts))
		}
		if l.Name == w.cfg.ipvsDevice() {
			out = append(out, ipvsStaleFrontends(in, l, info)...)
		}
	}
	return out
}

// routesByDev indexes main-table unicast routes into the pod network by
// device: host routes (one pod address) and all pod routes.
func routesByDev(w *world, routes []model.Route) (host, pod map[string][]netip.Prefix) {
	host, pod = map[string][]netip.Prefix{}, map[string][]netip.Prefix{}
	for _, r := range routes {
		if !mainTable(r) || r.Type != model.RouteUnicast || !w.inPodNetwork(r.Dst) {
			continue
		}
		for _, h := range r.Hops() {
			if h.Dev == "" {
				continue
			}
			pod[h.Dev] = append(pod[h.Dev], r.Dst)
			if r.Dst.IsSingleIP() && !h.Gateway.IsValid() {
				host[h.Dev] = append(host[h.Dev], r.Dst)
			}
		}
	}
	return host, pod
}

func anyLinkDown(routes []model.Route, dev string) bool {
	for _, r := range routes {
		if r.LinkDown && r.Dev == dev {
			return true
		}
	}
	return false
}

// podAddrs returns the pod addresses a host-side interface leads to: its
// host routes and the addresses on its peer, restricted to the pod network.
func podAddrs(w *world, l model.Link, host []netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, p := range host {
		out = append(out, p.Addr().Unmap())
	}
	for _, a := range l.PeerAddrs {
		a = a.Unmap()
		if a.IsLinkLocalUnicast() || !w.inPodNetwork(netip.PrefixFrom(a, a.BitLen())) {
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}

// orphanLink returns a finding when every pod address the link leads to
// belongs to no existing pod of this node. attributed is false when the
// link's pod addresses are unknown (nothing can be said about it).
func orphanLink(w *world, l model.Link, host []netip.Prefix) (f *model.Finding, attributed bool) {
	addrs := podAddrs(w, l, host)
	if len(addrs) == 0 {
		return nil, false
	}
	var strs, gone []string
	for _, a := range addrs {
		if _, ok := w.localPods[a]; ok {
			return nil, true
		}
		strs = append(strs, a.String())
		if p, ok := w.goneByAddr[a]; ok {
			gone = append(gone, p.String())
		}
	}
	detail := "Interface " + l.Name + " leads to " + strings.Join(strs, ", ") +
		", which is no pod of this node: the pod is gone but its interface was never cleaned up."
	if len(gone) > 0 {
		sort.Strings(gone)
		detail = "Interface " + l.Name + " leads to " + strings.Join(strs, ", ") + " of deleted pod " +
			strings.Join(slices.Compact(gone), ", ") + ": the pod is gone but its interface was never cleaned up."
	}
	ev := []string{"link " + l.Name + " (" + l.Kind + ", index " + strconv.Itoa(l.Index) + ")"}
	for _, p := range host {
		ev = append(ev, "host route "+p.String()+" dev "+l.Name)
	}
	if l.PeerResolved {
		ev = append(ev, "peer netns id "+strconv.Itoa(l.PeerNetnsID)+" holds "+addrList(l.PeerAddrs))
	}
	return &model.Finding{
		Kind: model.OrphanLink, Subject: l.Name + " (" + strings.Join(strs, ", ") + ")",
		Detail: detail, Evidence: ev,
	}, true
}

func linkDown(l model.Link, dsts []netip.Prefix) model.Finding {
	var ds []string
	for _, d := range dsts {
		ds = append(ds, d.String())
	}
	state := l.OperState
	if !l.AdminUp {
		state = "admin down"
	}
	return model.Finding{
		Kind:    model.LinkDown,
		Subject: l.Name,
		Detail: "Interface " + l.Name + " carries routes to " + strings.Join(ds, ", ") +
			" but is down (" + state + "), so traffic to those pods is dropped.",
		Evidence: []string{"link " + l.Name + " oper state " + l.OperState + ", admin up " + boolStr(l.AdminUp)},
	}
}

// ipvsStaleFrontends reports addresses bound to kube-ipvs0 that belong to no
// existing Service.
func ipvsStaleFrontends(in Inputs, l model.Link, info *Info) []model.Finding {
	if !in.ServicesKnown {
		info.Skipped = append(info.Skipped, "stale_frontend on "+l.Name+": service IPs unknown")
		return nil
	}
	live := map[netip.Addr]bool{}
	for _, a := range in.ServiceIPs {
		live[a.Unmap()] = true
	}
	var out []model.Finding
	for _, p := range l.Addrs {
		a := p.Addr().Unmap()
		if live[a] || a.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, model.Finding{
			Kind:    model.StaleFrontend,
			Subject: l.Name + " " + a.String(),
			Detail: "Address " + a.String() + " is still bound to " + l.Name +
				" but belongs to no existing Service, so this node still answers for it.",
			Evidence: []string{"addr " + p.String() + " dev " + l.Name},
		})
	}
	return out
}

func addrList(as []netip.Addr) string {
	if len(as) == 0 {
		return "no address"
	}
	var s []string
	for _, a := range as {
		s = append(s, a.String())
	}
	return strings.Join(s, ", ")
}

func boolStr(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
