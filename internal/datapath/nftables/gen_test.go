package nftables

import (
	"fmt"
	"net/netip"
	"strings"
)

// nftGenSpec describes a generated kube-proxy-shaped table: services with
// endpoints each; every affinityEvery-th service uses session affinity
// (endpoint chains), every nodePortEvery-th has a node port, every
// emptyEvery-th has no endpoints (no-endpoint-services reject).
type nftGenSpec struct {
	services, endpoints                      int
	affinityEvery, nodePortEvery, emptyEvery int
}

type nftGenService struct {
	ns, name  string
	clusterIP netip.Addr
	nodePort  uint16
	eps       []netip.AddrPort
	affinity  bool
	empty     bool
}

func (s nftGenService) chain(prefix string) string {
	base := s.ns + "/" + s.name + "/tcp/http"
	return prefix + ChainHash(base) + "-" + base
}

func (s nftGenService) epChain(ep netip.AddrPort) string {
	base := fmt.Sprintf("%s/%s/tcp/http__%s/%d", s.ns, s.name, ep.Addr(), ep.Port())
	return "endpoint-" + ChainHash(base) + "-" + base
}

func (g nftGenSpec) list() []nftGenService {
	out := make([]nftGenService, g.services)
	for i := range out {
		s := nftGenService{
			ns:        fmt.Sprintf("ns%d", i%50),
			name:      fmt.Sprintf("svc-%d", i),
			clusterIP: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}),
			affinity:  g.affinityEvery > 0 && i%g.affinityEvery == 0,
			empty:     g.emptyEvery > 0 && i%g.emptyEvery == 1,
		}
		if g.nodePortEvery > 0 && i%g.nodePortEvery == 0 {
			s.nodePort = uint16(30000 + (i/g.nodePortEvery)%2700)
		}
		for e := 0; e < g.endpoints && !s.empty; e++ {
			n := i*g.endpoints + e
			s.eps = append(s.eps, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 200 + byte(n>>16), byte(n >> 8), byte(n)}), 8080))
		}
		out[i] = s
	}
	return out
}

// text renders the table in `nft -f` syntax.
func (g nftGenSpec) text() string {
	var b strings.Builder
	svcs := g.list()
	b.WriteString("table ip kube-proxy {\n\tchain reject-chain {\n\t\treject\n\t}\n")
	for _, s := range svcs {
		if s.empty {
			continue
		}
		if s.affinity {
			var vm []string
			for i, ep := range s.eps {
				fmt.Fprintf(&b, "\tchain %s {\n\t\tmeta l4proto tcp dnat to %s\n\t}\n", s.epChain(ep), ep)
				vm = append(vm, fmt.Sprintf("%d : goto %s", i, s.epChain(ep)))
			}
			fmt.Fprintf(&b, "\tchain %s {\n\t\tnumgen random mod %d vmap { %s }\n\t}\n", s.chain("service-"), len(s.eps), strings.Join(vm, ", "))
		} else {
			var m []string
			for i, ep := range s.eps {
				m = append(m, fmt.Sprintf("%d : %s . %d", i, ep.Addr(), ep.Port()))
			}
			fmt.Fprintf(&b, "\tchain %s {\n\t\tmeta l4proto tcp dnat ip to numgen random mod %d map { %s }\n\t}\n", s.chain("service-"), len(s.eps), strings.Join(m, ", "))
		}
		if s.nodePort != 0 {
			fmt.Fprintf(&b, "\tchain %s {\n\t\tmeta mark set meta mark | 0x00004000 comment \"masquerade\"\n\t\tgoto %s\n\t}\n", s.chain("external-"), s.chain("service-"))
		}
	}
	var ips, nps, noeps, cips []string
	for _, s := range svcs {
		cips = append(cips, s.clusterIP.String())
		if s.empty {
			noeps = append(noeps, fmt.Sprintf("%s . tcp . 80 comment \"%s/%s:http\" : goto reject-chain", s.clusterIP, s.ns, s.name))
			continue
		}
		ips = append(ips, fmt.Sprintf("%s . tcp . 80 : goto %s", s.clusterIP, s.chain("service-")))
		if s.nodePort != 0 {
			nps = append(nps, fmt.Sprintf("tcp . %d : goto %s", s.nodePort, s.chain("external-")))
		}
	}
	fmt.Fprintf(&b, "\tset cluster-ips {\n\t\ttype ipv4_addr\n\t\telements = { %s }\n\t}\n", strings.Join(cips, ", "))
	nftGenMap(&b, "service-ips", "ipv4_addr . inet_proto . inet_service", ips)
	nftGenMap(&b, "service-nodeports", "inet_proto . inet_service", nps)
	nftGenMap(&b, "no-endpoint-services", "ipv4_addr . inet_proto . inet_service", noeps)
	b.WriteString("\tchain services {\n\t\tip daddr . meta l4proto . th dport vmap @service-ips\n")
	b.WriteString("\t\tfib daddr type local meta l4proto . th dport vmap @service-nodeports\n\t}\n}\n")
	return b.String()
}

func nftGenMap(b *strings.Builder, name, typ string, elems []string) {
	fmt.Fprintf(b, "\tmap %s {\n\t\ttype %s : verdict\n", name, typ)
	if len(elems) > 0 {
		fmt.Fprintf(b, "\t\telements = { %s }\n", strings.Join(elems, ",\n\t\t\t"))
	}
	b.WriteString("\t}\n")
}

// json renders the table as `nft -j list table ip kube-proxy` does.
func (g nftGenSpec) json() []byte {
	var b strings.Builder
	svcs := g.list()
	b.WriteString(`{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}}, {"table": {"family": "ip", "name": "kube-proxy", "handle": 1}}`)
	rule := func(chain, expr string) {
		fmt.Fprintf(&b, `, {"rule": {"family": "ip", "table": "kube-proxy", "chain": %q, "handle": 1, "expr": [%s]}}`, chain, expr)
	}
	chain := func(name string) {
		fmt.Fprintf(&b, `, {"chain": {"family": "ip", "table": "kube-proxy", "name": %q, "handle": 1}}`, name)
	}
	const l4 = `{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "tcp"}}`
	chain("reject-chain")
	rule("reject-chain", `{"reject": {"type": "icmp", "expr": "port-unreachable"}}`)
	var ips, nps, noeps, cips []string
	for _, s := range svcs {
		cips = append(cips, fmt.Sprintf("%q", s.clusterIP))
		if s.empty {
			noeps = append(noeps, fmt.Sprintf(`[{"elem": {"val": {"concat": [%q, "tcp", 80]}, "comment": "%s/%s:http"}}, {"goto": {"target": "reject-chain"}}]`, s.clusterIP, s.ns, s.name))
			continue
		}
		var parts []string
		for i, ep := range s.eps {
			if s.affinity {
				chain(s.epChain(ep))
				rule(s.epChain(ep), fmt.Sprintf(`%s, {"dnat": {"addr": %q, "port": %d}}`, l4, ep.Addr(), ep.Port()))
				parts = append(parts, fmt.Sprintf(`[%d, {"goto": {"target": %q}}]`, i, s.epChain(ep)))
			} else {
				parts = append(parts, fmt.Sprintf(`[%d, {"concat": [%q, %d]}]`, i, ep.Addr(), ep.Port()))
			}
		}
		ng := fmt.Sprintf(`{"numgen": {"mode": "random", "mod": %d, "offset": 0}}`, len(s.eps))
		chain(s.chain("service-"))
		if s.affinity {
			rule(s.chain("service-"), fmt.Sprintf(`{"vmap": {"key": %s, "data": {"set": [%s]}}}`, ng, strings.Join(parts, ", ")))
		} else {
			rule(s.chain("service-"), fmt.Sprintf(`%s, {"dnat": {"family": "ip", "addr": {"map": {"key": %s, "data": {"set": [%s]}}}}}`, l4, ng, strings.Join(parts, ", ")))
		}
		ips = append(ips, fmt.Sprintf(`[{"concat": [%q, "tcp", 80]}, {"goto": {"target": %q}}]`, s.clusterIP, s.chain("service-")))
		if s.nodePort != 0 {
			chain(s.chain("external-"))
			rule(s.chain("external-"), `{"mangle": {"key": {"meta": {"key": "mark"}}, "value": {"|": [{"meta": {"key": "mark"}}, 16384]}}}`)
			rule(s.chain("external-"), fmt.Sprintf(`{"goto": {"target": %q}}`, s.chain("service-")))
			nps = append(nps, fmt.Sprintf(`[{"concat": ["tcp", %d]}, {"goto": {"target": %q}}]`, s.nodePort, s.chain("external-")))
		}
	}
	m := func(name string, elems []string) {
		fmt.Fprintf(&b, `, {"map": {"family": "ip", "name": %q, "table": "kube-proxy", "handle": 1, "map": "verdict", "elem": [%s]}}`, name, strings.Join(elems, ", "))
	}
	fmt.Fprintf(&b, `, {"set": {"family": "ip", "name": "cluster-ips", "table": "kube-proxy", "type": "ipv4_addr", "handle": 1, "elem": [%s]}}`, strings.Join(cips, ", "))
	m("service-ips", ips)
	m("service-nodeports", nps)
	m("no-endpoint-services", noeps)
	chain("services")
	rule("services", `{"vmap": {"key": {"concat": [{"payload": {"protocol": "ip", "field": "daddr"}}, {"meta": {"key": "l4proto"}}, {"payload": {"protocol": "th", "field": "dport"}}]}, "data": "@service-ips"}}`)
	rule("services", `{"match": {"op": "==", "left": {"fib": {"result": "type", "flags": ["daddr"]}}, "right": "local"}}, {"vmap": {"key": {"concat": [{"meta": {"key": "l4proto"}}, {"payload": {"protocol": "th", "field": "dport"}}]}, "data": "@service-nodeports"}}`)
	b.WriteString("]}\n")
	return []byte(b.String())
}
