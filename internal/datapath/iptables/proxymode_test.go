package iptables

import (
	"os"
	"strings"
	"testing"
)

// TestRuleModes: the mode comes from the rules reached from nat
// KUBE-SERVICES. The files are real iptables-save output of rules
// restored into a namespace (their ORIGIN.md says how): nodes that
// switched kube-proxy mode in either direction, with a CNI's chains, and a
// plain IPVS-mode node.
func TestRuleModes(t *testing.T) {
	const corpus = "../../../testdata/captures/"
	for _, c := range []struct {
		file           string
		iptables, ipvs bool
	}{
		{"dualstack-ipvs-mode-leftover-iptables-chains-calico/node-a.iptables-save", false, true},
		{"dualstack-iptables-mode-leftover-ipvs-chains-flannel/node-a.iptables-save", true, false},
		{"dualstack-ipvs-mode-iptables-save/node-a.iptables-save", false, true},
		{"dualstack-iptables-v4-only/node-a.iptables-save", true, false},
		{"refuse-empty-iptables-save/node-a.iptables-save", false, false},
	} {
		data, err := os.ReadFile(corpus + c.file)
		if err != nil {
			t.Fatal(err)
		}
		d, err := parseDump(string(data))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		ipt, ipvs := ruleModes(d["nat"])
		if ipt != c.iptables || ipvs != c.ipvs {
			t.Errorf("%s: iptables mode %v, IPVS mode %v; want %v, %v", c.file, ipt, ipvs, c.iptables, c.ipvs)
		}
		if _, got := ipvsModeDump(d); got != (c.ipvs && !c.iptables) {
			t.Errorf("%s: ipvsModeDump %v", c.file, got)
		}
	}
}

// TestRuleModesSynthetic: leftovers that are not reached count for
// nothing, whatever they hold; a reached DNAT or service chain makes the
// dump an iptables-mode one even beside IPVS set matches.
func TestRuleModesSynthetic(t *testing.T) {
	nat := func(decls string, rules ...string) string {
		return "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-NODE-PORT - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n" + decls +
			strings.Join(rules, "\n") + "\nCOMMIT\n"
	}
	ipvsRule := "-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT"
	for name, c := range map[string]struct {
		text           string
		iptables, ipvs bool
	}{
		"orphan_sep_with_dnat": {nat(":KUBE-SEP-AAAA - [0:0]\n:KUBE-SVC-BBBB - [0:0]\n", ipvsRule,
			"-A KUBE-SVC-BBBB -j KUBE-SEP-AAAA", "-A KUBE-SEP-AAAA -p tcp -j DNAT --to-destination 10.244.1.10:8080"), false, true},
		"nodeport_jump_only": {nat("", "-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT"), false, true},
		"reached_svc_chain":  {nat(":KUBE-SVC-BBBB - [0:0]\n", ipvsRule, "-A KUBE-SERVICES -d 10.96.0.1/32 -j KUBE-SVC-BBBB"), true, true},
		"cni_chain_with_set": {nat(":cali-nat-outgoing - [0:0]\n", "-A PREROUTING -j cali-nat-outgoing",
			"-A cali-nat-outgoing -m set --match-set cali40masq-ipam-pools src -j MASQUERADE"), false, false},
	} {
		d, err := parseDump(c.text)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ipt, ipvs := ruleModes(d["nat"]); ipt != c.iptables || ipvs != c.ipvs {
			t.Errorf("%s: iptables mode %v, IPVS mode %v; want %v, %v", name, ipt, ipvs, c.iptables, c.ipvs)
		}
	}
}
