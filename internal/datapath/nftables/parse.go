package nftables

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// ParseJSON reads `nft -j list table ip kube-proxy` (v4) and
// `nft -j list table ip6 kube-proxy` (v6) output. Either may be empty (no
// such table). It is pure: no I/O.
func ParseJSON(v4, v6 []byte, opts model.Hints) (model.Observed, error) {
	t4, t6, err := parseNFTJSONTables(v4, v6)
	if err != nil {
		return model.Observed{}, err
	}
	return nftObserve([]*nftTable{t4, t6}, opts), nil
}

// ParseJSONTables is ParseJSON that also says which families' kube-proxy
// tables were found (v4 and v6 may be the same `nft -j list ruleset` text).
func ParseJSONTables(v4, v6 []byte, opts model.Hints) (model.Observed, map[model.IPFamily]bool, error) {
	t4, t6, err := parseNFTJSONTables(v4, v6)
	if err != nil {
		return model.Observed{}, nil, err
	}
	found := map[model.IPFamily]bool{}
	if t4 != nil {
		found[model.IPv4] = true
	}
	if t6 != nil {
		found[model.IPv6] = true
	}
	if len(found) == 0 && (holdsIPTablesNFT(v4) || holdsIPTablesNFT(v6)) {
		return model.Observed{}, nil, fmt.Errorf("no kube-proxy table, but iptables-nft's tables hold kube-proxy's KUBE-SERVICES chain: " +
			"kube-proxy runs in iptables mode on this node; capture `iptables-save` (and `ip6tables-save`) and pass it as --iptables-save")
	}
	return nftObserve([]*nftTable{t4, t6}, opts), found, nil
}

// nftObserve turns tables (nil entries are absent tables) into the observed
// model. Shared by the JSON and the netlink paths (see nftView).
func nftObserve(tables []*nftTable, opts model.Hints) model.Observed {
	return newNFTView(tables, opts).observed()
}

type nftHintKey struct {
	addr  netip.Addr
	port  uint16
	proto model.Protocol
}

func nftHints(fes map[model.Frontend]model.ServicePort) map[nftHintKey]model.FrontendKind {
	m := make(map[nftHintKey]model.FrontendKind, len(fes))
	won := make(map[nftHintKey]model.Frontend, len(fes))
	for f := range fes {
		if !f.IP.IsValid() {
			continue
		}
		k := nftHintKey{f.IP.Unmap(), f.Port, f.Protocol}
		// Two kinds for one address (rare): the greatest frontend wins, so
		// the answer does not depend on map order.
		if w, ok := won[k]; ok && f.Less(w) {
			continue
		}
		won[k], m[k] = f, f.Kind
	}
	return m
}

// nftKey identifies a destination in the maps: addr . proto . port, or
// proto . port for node ports (addr invalid).
type nftKey struct {
	addr  netip.Addr
	proto model.Protocol
	port  uint16
}

func (k nftKey) String() string {
	if !k.addr.IsValid() {
		return fmt.Sprintf("*:%d/%s", k.port, k.proto)
	}
	return netip.AddrPortFrom(k.addr, k.port).String() + "/" + string(k.proto)
}

// nftEntry gathers what the maps say about one destination.
type nftEntry struct {
	dispatch, noEndpoint, firewall *nftElem
	dispatchMap, noEndpointMap     string
}

type nftBuilder struct {
	sink      *[]string // where warnings go: the table's or the destination's
	names     *nftNameIndex
	hints     map[nftHintKey]model.FrontendKind
	haveHints bool
	t         *nftTable
	ev        *nftEvaluator
}

func (b *nftBuilder) warn(format string, args ...any) {
	*b.sink = append(*b.sink, fmt.Sprintf("%s: ", nftTableLabel(b.t.Family))+fmt.Sprintf(format, args...))
}

func nftTableLabel(fam model.IPFamily) string {
	if fam == model.IPv6 {
		return "ip6 kube-proxy"
	}
	return "ip kube-proxy"
}

// table collects the destinations of a table from its maps, warning about
// the table as a whole into b.sink.
func (b *nftBuilder) table(t *nftTable) map[nftKey]*nftEntry {
	b.t, b.ev = t, newNFTEvaluator(t)
	b.checkWiring()
	entries := map[nftKey]*nftEntry{}
	b.collect(entries, nftMapServiceIPs, false, func(e *nftEntry, el *nftElem) { e.dispatch, e.dispatchMap = el, nftMapServiceIPs })
	b.collect(entries, nftMapServiceNodePorts, true, func(e *nftEntry, el *nftElem) { e.dispatch, e.dispatchMap = el, nftMapServiceNodePorts })
	b.collect(entries, nftMapNoEndpointSvcs, false, func(e *nftEntry, el *nftElem) { e.noEndpoint, e.noEndpointMap = el, nftMapNoEndpointSvcs })
	b.collect(entries, nftMapNoEndpointNPs, true, func(e *nftEntry, el *nftElem) { e.noEndpoint, e.noEndpointMap = el, nftMapNoEndpointNPs })
	b.collect(entries, nftMapFirewallIPs, false, func(e *nftEntry, el *nftElem) { e.firewall = el })
	return entries
}

// checkWiring warns when the service dispatch maps are not used by the
// services chain (the table would then redirect nothing).
func (b *nftBuilder) checkWiring() {
	refs := map[string]bool{}
	for _, r := range b.t.Chains["services"] {
		if r.MapRef != "" {
			refs[r.MapRef] = true
		}
	}
	for _, m := range []string{nftMapServiceIPs, nftMapServiceNodePorts} {
		if len(b.t.Maps[m]) > 0 && !refs[m] {
			b.warn("map %s has elements but chain services does not dispatch through it", m)
		}
	}
}

func nftKeyLess(a, b nftKey) bool {
	if c := a.addr.Compare(b.addr); c != 0 {
		return c < 0
	}
	if a.port != b.port {
		return a.port < b.port
	}
	return a.proto < b.proto
}

func (b *nftBuilder) collect(entries map[nftKey]*nftEntry, mapName string, nodePort bool, set func(*nftEntry, *nftElem)) {
	elems := b.t.Maps[mapName]
	for i := range elems {
		k, err := nftParseKey(elems[i].Key, nodePort)
		if err != nil {
			b.warn("map %s element %q: %v", mapName, elems[i].String(), err)
			continue
		}
		e := entries[k]
		if e == nil {
			e = &nftEntry{}
			entries[k] = e
		}
		set(e, &elems[i])
	}
}

func nftParseKey(parts []string, nodePort bool) (nftKey, error) {
	var k nftKey
	if nodePort {
		if len(parts) != 2 {
			return k, fmt.Errorf("want proto . port")
		}
		parts = append([]string{""}, parts...)
	} else {
		if len(parts) != 3 {
			return k, fmt.Errorf("want addr . proto . port")
		}
		a, err := netip.ParseAddr(parts[0])
		if err != nil {
			return k, err
		}
		k.addr = a.Unmap()
	}
	proto, err := model.ParseProtocol(parts[1])
	if err != nil {
		return k, err
	}
	port, err := strconv.ParseUint(parts[2], 10, 16)
	if err != nil {
		return k, fmt.Errorf("bad port %q", parts[2])
	}
	k.proto, k.port = proto, uint16(port)
	return k, nil
}

// entry decides the verdict of one destination the way the kernel does:
// firewall (filter, before DNAT), then service dispatch (nat), then the
// no-endpoint maps (filter, after DNAT) for what was not redirected. Its
// warnings go to b.sink; ok is false when the table redirects nothing for it.
func (b *nftBuilder) entry(k nftKey, e *nftEntry) (fe model.Frontend, v model.Verdict, ok bool) {
	var ev []string
	var warns []string
	out := nftOutcome{}
	if e.firewall != nil {
		ev = append(ev, nftMapFirewallIPs+": "+e.firewall.String())
		fw := b.ev.verdict(e.firewall.Verdict, 0)
		warns = append(warns, fw.Warnings...)
		if fw.Action == model.Drop || fw.Action == model.Reject {
			out = fw
		}
	}
	if !out.decided() && e.dispatch != nil {
		ev = append(ev, e.dispatchMap+": "+e.dispatch.String())
		out = b.ev.verdict(e.dispatch.Verdict, 0)
		warns = append(warns, out.Warnings...)
	}
	if out.Action != model.Forward && e.noEndpoint != nil {
		ev = append(ev, out.Evidence...)
		ev = append(ev, e.noEndpointMap+": "+e.noEndpoint.String())
		out = b.ev.verdict(e.noEndpoint.Verdict, 0)
		warns = append(warns, out.Warnings...)
	}
	ev = append(ev, out.Evidence...)
	for _, w := range warns {
		b.warn("%s: %s", k, w)
	}
	if !out.decided() {
		b.warn("%s: no verdict (the table redirects nothing for it): %s", k, strings.Join(ev, "; "))
		return fe, v, false
	}
	fe = b.frontend(k, e)
	v = model.Verdict{Service: b.servicePort(k, e), Action: out.Action, Evidence: ev}
	if out.Action == model.Forward {
		v.Backends = model.SortBackends(append([]netip.AddrPort(nil), out.Backends...))
	}
	return fe, v, true
}

// servicePort names the service port of a destination: from the chain the
// dispatch or firewall map points to, else from the no-endpoint element comment.
func (b *nftBuilder) servicePort(k nftKey, e *nftEntry) model.ServicePort {
	var errs []string
	for _, el := range []*nftElem{e.dispatch, e.firewall} {
		if el == nil || el.Verdict.Target == "" {
			continue
		}
		sp, err := b.names.resolve(el.Verdict.Target)
		if err == nil {
			return sp
		}
		errs = append(errs, err.Error())
		if !sp.IsZero() {
			b.warn("%s: %s", k, err)
			return sp
		}
	}
	if e.noEndpoint != nil {
		if sp, ok := nftParsePortComment(e.noEndpoint.Comment, k.proto); ok {
			return sp
		}
		errs = append(errs, fmt.Sprintf("%s element has no service comment", e.noEndpointMap))
	}
	b.warn("%s: service port unknown: %s", k, strings.Join(errs, "; "))
	return model.ServicePort{}
}

// frontend classifies a destination (see model.Hints.Frontends).
func (b *nftBuilder) frontend(k nftKey, e *nftEntry) model.Frontend {
	if !k.addr.IsValid() {
		return model.NewNodePort(k.port, k.proto, b.t.Family)
	}
	mk := func(kind model.FrontendKind) model.Frontend {
		return model.NewFrontend(k.addr, k.port, k.proto, kind)
	}
	if kind, ok := b.hints[nftHintKey{k.addr, k.port, k.proto}]; ok {
		return mk(kind)
	}
	if b.t.ClusterIPs[k.addr] {
		return mk(model.ClusterIP)
	}
	external := e.dispatch != nil && strings.HasPrefix(e.dispatch.Verdict.Target, nftPrefixExternal)
	if e.dispatch != nil && !external && e.dispatch.Verdict.Target != "" {
		return mk(model.ClusterIP)
	}
	if e.firewall != nil {
		return mk(model.LoadBalancer)
	}
	kind := model.ExternalIP
	if !external && !b.t.HasClusterIPSet {
		kind = model.ClusterIP
	}
	if !b.haveHints {
		b.warn("%s: frontend kind guessed as %s (the API's frontends were not given)", k, kind)
	}
	return mk(kind)
}
