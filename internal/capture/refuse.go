package capture

import (
	"bytes"
	"fmt"

	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
)

// The refusals of captures that hold no kube-proxy rules at all: compared
// with the cluster they would report every frontend missing. Each names the
// capture to take instead, on one line.

// otherModes is what to capture when kube-proxy runs in another mode.
const otherModes = "if kube-proxy runs in nftables mode pass `nft -j list ruleset` as --nft-json, " +
	"in IPVS mode `ipvsadm -Sn` as --ipvsadm-save"

// hasKubeServicesRule reports whether iptables-save (or `iptables -S`)
// text holds a rule of chain KUBE-SERVICES: kube-proxy's iptables mode
// always writes at least its KUBE-NODEPORTS jump there, its IPVS mode its
// ipset matches. A rule line may be indented (a pasted capture). The
// search is bytes.Index over the text: no per-line work on a large dump.
func hasKubeServicesRule(data []byte) bool {
	for _, cmd := range []string{"-A KUBE-SERVICES ", "-I KUBE-SERVICES "} {
		pat := []byte(cmd)
		for off := 0; ; {
			i := bytes.Index(data[off:], pat)
			if i < 0 {
				break
			}
			i += off
			if lineStart(data, i) {
				return true
			}
			off = i + len(pat)
		}
	}
	return false
}

// lineStart reports whether only spaces and tabs precede data[i] on its line.
func lineStart(data []byte, i int) bool {
	for i--; i >= 0; i-- {
		switch data[i] {
		case '\n':
			return true
		case ' ', '\t':
		default:
			return false
		}
	}
	return true
}

// noIPTablesRules is the refusal of an iptables capture without kube-proxy
// rules.
func noIPTablesRules(flag, path string) error {
	return fmt.Errorf("%s %s holds no kube-proxy rules (no rule in chain KUBE-SERVICES): capture `iptables-save` as root "+
		"in the node's host network namespace, where kube-proxy writes them; %s", flag, clusterfile.InputName(path), otherModes)
}

// noNFTTable is the refusal of nft JSON without a kube-proxy table.
func noNFTTable(path string) error {
	return fmt.Errorf("%s holds no table ip or ip6 kube-proxy: capture `nft -j list ruleset` as root on the node; "+
		"if kube-proxy runs in iptables mode pass `iptables-save` as --iptables-save, in IPVS mode `ipvsadm -Sn` as --ipvsadm-save", path)
}

// noVirtualServers is the refusal of an ipvsadm capture without a virtual
// server (a cluster always has the `kubernetes` Service).
func noVirtualServers(path string) error {
	return fmt.Errorf("%s holds no IPVS virtual server: capture `ipvsadm -Sn` as root on the node; "+
		"if kube-proxy runs in iptables mode pass `iptables-save` as --iptables-save, in nftables mode `nft -j list ruleset` as --nft-json", path)
}

// checkIPTablesRules refuses an iptables capture in which no file holds a
// KUBE-SERVICES rule, naming the first file given.
func checkIPTablesRules(f Files, dumps iptables.Dumps) error {
	if hasKubeServicesRule(dumps.IPv4) || hasKubeServicesRule(dumps.IPv6) {
		return nil
	}
	if f.IPTables != "" {
		return noIPTablesRules("--iptables-save", f.IPTables)
	}
	return noIPTablesRules("--ip6tables-save", f.IP6Tables)
}
