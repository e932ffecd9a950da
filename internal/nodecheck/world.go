package nodecheck

import (
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// ownNodeOnly is why the rules that judge other nodes are skipped when only
// this node's Node is known.
const ownNodeOnly = "only this node's Node is watched (--watch-nodes=own); other nodes' podCIDRs and existence are unknown"

// ownedPrefix is a node's podCIDR.
type ownedPrefix struct {
	Prefix netip.Prefix
	Node   string
}

// world indexes the inputs once for all rules.
type world struct {
	cfg        Config
	now        time.Time
	self       string
	nodes      map[string]model.NodeInfo
	nodeAddrs  map[netip.Addr]string
	podCIDRs   []ownedPrefix
	localPods  map[netip.Addr]model.PodInfo // pods of this node that still exist
	goneByAddr map[netip.Addr]model.PodInfo // deleted pods of this node, to name previous owners
	localAddrs map[netip.Addr]bool
	extraGW    map[netip.Addr]bool
	// onlyOwnNode: nodes holds this node alone (Inputs.OwnNodeOnly).
	onlyOwnNode bool
	podNet      []netip.Prefix
	podNetSrc   string

	// indexes, so rules stay linear in routes at thousands of nodes
	cidrOwners   map[netip.Prefix][]string // podCIDR -> owning nodes
	supernets    map[netip.Prefix]bool     // every strict supernet of a podCIDR
	sortedNodeIP []netip.Addr
	sortedPodIP  []netip.Addr
}

func newWorld(in Inputs, cfg Config, now time.Time) *world {
	w := &world{
		cfg: cfg, now: now, self: in.NodeName, onlyOwnNode: in.OwnNodeOnly,
		nodes:      map[string]model.NodeInfo{},
		nodeAddrs:  map[netip.Addr]string{},
		localPods:  map[netip.Addr]model.PodInfo{},
		goneByAddr: map[netip.Addr]model.PodInfo{},
		localAddrs: map[netip.Addr]bool{},
		extraGW:    map[netip.Addr]bool{},
	}
	for _, n := range in.Nodes {
		w.nodes[n.Name] = n
		for _, a := range n.Addresses {
			w.nodeAddrs[a.Unmap()] = n.Name
		}
		for _, p := range n.PodCIDRs {
			w.podCIDRs = append(w.podCIDRs, ownedPrefix{p.Masked(), n.Name})
		}
	}
	for _, p := range in.Pods {
		if p.HostNetwork || (in.NodeName != "" && p.NodeName != "" && p.NodeName != in.NodeName) {
			continue
		}
		for _, a := range p.IPs {
			if p.Deleted {
				w.goneByAddr[a.Unmap()] = p
			} else {
				w.localPods[a.Unmap()] = p
			}
		}
	}
	if in.Snapshot != nil {
		w.localAddrs = in.Snapshot.LocalAddrs()
	}
	for _, g := range cfg.ExtraGateways {
		w.extraGW[g.Unmap()] = true
	}
	w.podNet, w.podNetSrc = podNetwork(cfg.ClusterCIDRs, w.podCIDRs, w.localPods)
	w.buildIndexes()
	return w
}

func (w *world) buildIndexes() {
	w.cidrOwners = map[netip.Prefix][]string{}
	w.supernets = map[netip.Prefix]bool{}
	for _, o := range w.podCIDRs {
		w.cidrOwners[o.Prefix] = append(w.cidrOwners[o.Prefix], o.Node)
		for k := o.Prefix.Bits() - 1; k >= 0; k-- {
			sup := netip.PrefixFrom(o.Prefix.Addr(), k).Masked()
			if w.supernets[sup] {
				break // shorter ones were added with it
			}
			w.supernets[sup] = true
		}
	}
	for a := range w.nodeAddrs {
		w.sortedNodeIP = append(w.sortedNodeIP, a)
	}
	for a := range w.localPods {
		w.sortedPodIP = append(w.sortedPodIP, a)
	}
	slices.SortFunc(w.sortedNodeIP, netip.Addr.Compare)
	slices.SortFunc(w.sortedPodIP, netip.Addr.Compare)
}

// anyIn reports whether a sorted address list holds an address inside p.
func anyIn(sorted []netip.Addr, p netip.Prefix) bool {
	i, _ := slices.BinarySearchFunc(sorted, p.Masked().Addr(), netip.Addr.Compare)
	return i < len(sorted) && p.Contains(sorted[i])
}

// podNetwork returns the cluster pod network and where it came from.
func podNetwork(cidrs []netip.Prefix, owned []ownedPrefix, pods map[netip.Addr]model.PodInfo) ([]netip.Prefix, string) {
	if len(cidrs) > 0 {
		out := make([]netip.Prefix, 0, len(cidrs))
		for _, c := range cidrs {
			out = append(out, c.Masked())
		}
		return out, "cluster-cidr"
	}
	var ps []netip.Prefix
	for _, o := range owned {
		ps = append(ps, o.Prefix)
	}
	if out := inferCover(ps); len(out) > 0 {
		return out, "inferred from node podCIDRs"
	}
	ps = ps[:0]
	for a := range pods {
		ps = append(ps, netip.PrefixFrom(a, a.BitLen()))
	}
	if out := inferCover(ps); len(out) > 0 {
		return out, "inferred from pod IPs"
	}
	return nil, ""
}

// inferCover returns, per family, the longest prefix covering all of ps that
// is at least 8 bits shorter than the shortest of them (a /24 per node gives
// a /16 cluster network, as kube-controller-manager's defaults do). Host
// prefixes (pod IPs) count as /24 (IPv4) or /64 (IPv6).
func inferCover(ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
		var cover netip.Prefix
		minBits := 128
		for _, p := range ps {
			if model.FamilyOf(p.Addr()) != fam {
				continue
			}
			bits := p.Bits()
			if bits == p.Addr().BitLen() {
				bits = map[bool]int{true: 24, false: 64}[p.Addr().Is4()]
			}
			minBits = min(minBits, bits)
			if !cover.IsValid() {
				cover = p
				continue
			}
			for cover.Bits() > 0 && !(cover.Contains(p.Addr()) && cover.Bits() <= p.Bits()) {
				cover = netip.PrefixFrom(cover.Addr(), cover.Bits()-1).Masked()
			}
		}
		if !cover.IsValid() {
			continue
		}
		bits := min(cover.Bits(), max(minBits-8, 0))
		out = append(out, netip.PrefixFrom(cover.Addr(), bits).Masked())
	}
	return out
}

// inPodNetwork reports whether dst lies inside the pod network.
func (w *world) inPodNetwork(dst netip.Prefix) bool {
	for _, pn := range w.podNet {
		if pn.Bits() <= dst.Bits() && pn.Contains(dst.Addr()) {
			return true
		}
	}
	return false
}

// containsNodeAddr reports whether dst holds a node's own address (a node
// network route, not a pod route).
func (w *world) containsNodeAddr(dst netip.Prefix) bool { return anyIn(w.sortedNodeIP, dst) }

// overlapNodes returns the nodes whose podCIDR overlaps dst, sorted.
func (w *world) overlapNodes(dst netip.Prefix) []string {
	var out []string
	for k := dst.Bits(); k >= 0; k-- { // podCIDRs equal to or containing dst
		out = append(out, w.cidrOwners[netip.PrefixFrom(dst.Addr(), k).Masked()]...)
	}
	if w.aggregate(dst) { // podCIDRs inside dst: rare, scan
		for _, o := range w.podCIDRs {
			if o.Prefix.Bits() > dst.Bits() && dst.Contains(o.Prefix.Addr()) {
				out = append(out, o.Node)
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// aggregate reports whether dst strictly contains a node podCIDR.
func (w *world) aggregate(dst netip.Prefix) bool { return w.supernets[dst.Masked()] }

// localPodIn reports whether a pod of this node has an address inside dst.
func (w *world) localPodIn(dst netip.Prefix) bool { return anyIn(w.sortedPodIP, dst) }

// knownGateway says why a gateway is legitimate, or "" when it is not.
func (w *world) knownGateway(g netip.Addr) string {
	g = g.Unmap()
	switch {
	case w.localAddrs[g]:
		return "local address"
	case w.extraGW[g]:
		return "configured gateway"
	case g.IsLinkLocalUnicast():
		return "link-local next hop (not matched to a node)"
	}
	if n, ok := w.nodeAddrs[g]; ok {
		return "address of node " + n
	}
	for _, o := range w.podCIDRs {
		if o.Prefix.Contains(g) {
			return "tunnel address in podCIDR of node " + o.Node
		}
	}
	return ""
}

// nodeGone reports whether a node is missing or NotReady for too long, and why.
func (w *world) nodeGone(name string) (bool, string) {
	n, ok := w.nodes[name]
	if !ok {
		return true, "does not exist"
	}
	if n.Ready || n.ReadySince.IsZero() {
		return false, ""
	}
	d := w.now.Sub(n.ReadySince)
	if d <= w.cfg.nodeGoneAfter() {
		return false, ""
	}
	return true, "has been NotReady for " + d.Truncate(time.Second).String()
}
