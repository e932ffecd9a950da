package iptables

import (
	"slices"
	"strings"
)

// Which kube-proxy mode wrote a dump is told from the rules traffic meets,
// never from chain declarations. A node whose kube-proxy changed mode keeps
// the other mode's leftovers: recent kube-proxy versions leave another
// mode's rules alone at startup (`kube-proxy --cleanup` removes them), and
// older ones flushed but could not always delete them, leaving empty
// declarations:
//   - iptables → IPVS: the IPVS proxier rewrites nat KUBE-SERVICES (set
//     matches, a jump to KUBE-NODE-PORT) but leaves KUBE-SVC-*/KUBE-SEP-*
//     chains (often flushed to empty declarations) and KUBE-NODEPORTS, now
//     reached by nothing;
//   - IPVS → iptables: the iptables proxier rewrites nat KUBE-SERVICES (jumps
//     to KUBE-SVC-*/KUBE-EXT-*, KUBE-NODEPORTS last) but leaves the IPVS-mode
//     chains KUBE-NODE-PORT and KUBE-LOAD-BALANCER with their set matches,
//     reached by nothing.
//
// So both tests look only at nat KUBE-SERVICES and the chains it reaches.
// A CNI's chains (Calico cali-*, Flannel FLANNEL-*) are never reached from
// KUBE-SERVICES and do not count.

// ipvsChains are the chains only kube-proxy's IPVS mode jumps to from
// KUBE-SERVICES.
var ipvsChains = []string{"KUBE-NODE-PORT", "KUBE-LOAD-BALANCER"}

// ipvsSets are the prefixes of the ipsets only kube-proxy's IPVS mode
// matches (KUBE-CLUSTER-IP, KUBE-NODE-PORT-TCP, KUBE-LOAD-BALANCER-LOCAL,
// KUBE-EXTERNAL-IP, ...).
var ipvsSets = []string{"--match-set KUBE-CLUSTER-IP", "--match-set KUBE-NODE-PORT", "--match-set KUBE-LOAD-BALANCER",
	"--match-set KUBE-EXTERNAL-IP"}

// iptablesModeTarget reports whether a jump is to a chain only kube-proxy's
// iptables mode writes: a service, endpoint, external, firewall or
// local-traffic chain, or KUBE-NODEPORTS.
func iptablesModeTarget(t string) bool {
	return t == chainNodePorts || isServiceChainTarget(t)
}

// ruleModes walks nat KUBE-SERVICES and every kube-proxy chain it reaches
// and reports whether those rules are iptables-mode rules (jumps to service
// chains, DNAT) and whether they are IPVS-mode rules (ipset matches, jumps to
// the IPVS-mode chains).
func ruleModes(nat *ipTable) (iptablesMode, ipvsMode bool) {
	if nat == nil {
		return false, false
	}
	seen := map[string]bool{chainServices: true}
	queue := []string{chainServices}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		for _, r := range nat.rules(name) {
			t := r.target()
			switch {
			case t == "DNAT" || iptablesModeTarget(t):
				iptablesMode = true
			case hasAny(r.text, ipvsSets) || slices.Contains(ipvsChains, t):
				ipvsMode = true
			}
			if strings.HasPrefix(t, "KUBE-") && !seen[t] && nat.chain(t) != nil {
				seen[t] = true
				queue = append(queue, t)
			}
		}
	}
	return iptablesMode, ipvsMode
}

// ipvsModeDump recognises a dump written by kube-proxy's IPVS mode: the
// rules reached from nat KUBE-SERVICES match its ipsets or jump to its
// chains, and none sends traffic to an iptables-mode service chain
// (leftover KUBE-SVC-*/KUBE-SEP-* declarations do not count). It returns
// the nat header's line.
func ipvsModeDump(d ipDump) (int, bool) {
	nat := d["nat"]
	iptablesMode, ipvsMode := ruleModes(nat)
	if !ipvsMode || iptablesMode {
		return 0, false
	}
	return nat.line, true
}

func hasAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
