package bench

import (
	"fmt"
	"strings"

	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nftables"
)

// NFTText renders table ip kube-proxy as kube-proxy's nftables mode writes
// it (v1.37 shape: services without session affinity dnat through a numgen
// map, node ports through external- chains, services without endpoints in
// no-endpoint-services), in `nft -f` syntax.
func (s Spec) NFTText() string {
	var b strings.Builder
	svcs := s.List()
	var cips, ips, nps, noeps, nonps []string
	var chains strings.Builder
	for _, v := range svcs {
		cips = append(cips, v.ClusterIP.String())
		name := iptables.KubeProxyPortName(v.Port)
		if len(v.Endpoints) == 0 {
			noeps = append(noeps, fmt.Sprintf("%s . tcp . 80 comment %q : goto reject-chain", v.ClusterIP, name))
			if v.NodePort != 0 {
				nonps = append(nonps, fmt.Sprintf("tcp . %d comment %q : goto reject-chain", v.NodePort, name))
			}
			continue
		}
		svc := "service-" + nftables.ChainHash(nftables.ChainBase(v.Port)) + "-" + nftables.ChainBase(v.Port)
		ips = append(ips, fmt.Sprintf("%s . tcp . 80 : goto %s", v.ClusterIP, svc))
		var m []string
		for i, ep := range v.Endpoints {
			m = append(m, fmt.Sprintf("%d : %s . %d", i, ep.Addr(), ep.Port()))
		}
		fmt.Fprintf(&chains, "\tchain %s {\n\t\tmeta l4proto tcp dnat ip to numgen random mod %d map { %s }\n\t}\n", svc, len(m), strings.Join(m, ", "))
		if v.NodePort != 0 {
			ext := "external-" + nftables.ChainHash(nftables.ChainBase(v.Port)) + "-" + nftables.ChainBase(v.Port)
			nps = append(nps, fmt.Sprintf("tcp . %d : goto %s", v.NodePort, ext))
			fmt.Fprintf(&chains, "\tchain %s {\n\t\tjump mark-for-masquerade\n\t\tgoto %s\n\t}\n", ext, svc)
		}
	}
	b.WriteString("table ip kube-proxy {\n\tcomment \"rules for kube-proxy\"\n")
	nftSet(&b, "cluster-ips", "ipv4_addr", cips)
	nftSet(&b, "nodeport-ips", "ipv4_addr", []string{NodeIP.String()})
	nftSet(&b, "no-endpoint-services", "ipv4_addr . inet_proto . inet_service : verdict", noeps)
	nftSet(&b, "no-endpoint-nodeports", "inet_proto . inet_service : verdict", nonps)
	nftSet(&b, "firewall-ips", "ipv4_addr . inet_proto . inet_service : verdict", nil)
	nftSet(&b, "service-ips", "ipv4_addr . inet_proto . inet_service : verdict", ips)
	nftSet(&b, "service-nodeports", "inet_proto . inet_service : verdict", nps)
	b.WriteString(nftBaseChains)
	b.WriteString(chains.String())
	b.WriteString("}\n")
	return b.String()
}

func nftSet(b *strings.Builder, name, typ string, elems []string) {
	kind := "set"
	if strings.Contains(typ, ":") {
		kind = "map"
	}
	fmt.Fprintf(b, "\t%s %s {\n\t\ttype %s\n", kind, name, typ)
	if len(elems) > 0 {
		fmt.Fprintf(b, "\t\telements = { %s }\n", strings.Join(elems, ",\n\t\t\t"))
	}
	b.WriteString("\t}\n")
}

const nftBaseChains = `	chain filter-prerouting-pre-dnat {
		type filter hook prerouting priority dstnat - 10; policy accept;
		ct state new jump firewall-check
	}
	chain filter-output-pre-dnat {
		type filter hook output priority -110; policy accept;
		ct state new jump firewall-check
	}
	chain filter-input {
		type filter hook input priority filter; policy accept;
		ct state new jump nodeport-endpoints-check
		ct state new jump service-endpoints-check
	}
	chain filter-forward {
		type filter hook forward priority filter; policy accept;
		ct state new jump service-endpoints-check
		ct state new jump cluster-ips-check
	}
	chain filter-output {
		type filter hook output priority filter; policy accept;
		ct state new jump service-endpoints-check
		ct state new jump cluster-ips-check
	}
	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		jump services
	}
	chain nat-output {
		type nat hook output priority -100; policy accept;
		jump services
	}
	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		jump masquerading
	}
	chain nodeport-endpoints-check {
		ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
	}
	chain service-endpoints-check {
		ip daddr . meta l4proto . th dport vmap @no-endpoint-services
	}
	chain firewall-check {
		ip daddr . meta l4proto . th dport vmap @firewall-ips
	}
	chain services {
		ip daddr @cluster-ips ip saddr != ` + podCIDR + ` meta mark set meta mark | 0x00004000 comment "masquerade clusterIP traffic from outside cluster"
		ip daddr . meta l4proto . th dport vmap @service-ips
		ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
	}
	chain mark-for-masquerade {
		meta mark set meta mark | 0x00004000
	}
	chain masquerading {
		meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random
	}
	chain cluster-ips-check {
		ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
		ip daddr ` + serviceCIDR + ` drop comment "Drop traffic to unallocated ClusterIPs"
	}
	chain reject-chain {
		comment "helper for @no-endpoint-services / @no-endpoint-nodeports"
		reject
	}
`
