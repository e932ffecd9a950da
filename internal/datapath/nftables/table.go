package nftables

import (
	"net/netip"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// kube-proxy's nftables table and the maps and sets the reader starts from.
const (
	nftTableName           = "kube-proxy"
	nftMapServiceIPs       = "service-ips"
	nftMapServiceNodePorts = "service-nodeports"
	nftMapNoEndpointSvcs   = "no-endpoint-services"
	nftMapNoEndpointNPs    = "no-endpoint-nodeports"
	nftMapFirewallIPs      = "firewall-ips"
	nftSetClusterIPs       = "cluster-ips"
)

// nftReaderMaps are the verdict maps the reader needs (the live path reads
// only these; the JSON path ignores the rest).
var nftReaderMaps = []string{
	nftMapServiceIPs, nftMapServiceNodePorts, nftMapNoEndpointSvcs, nftMapNoEndpointNPs, nftMapFirewallIPs,
}

// Verdict kinds, spelled as nft spells them.
const (
	nftVerdictGoto     = "goto"
	nftVerdictJump     = "jump"
	nftVerdictDrop     = "drop"
	nftVerdictReject   = "reject"
	nftVerdictAccept   = "accept"
	nftVerdictReturn   = "return"
	nftVerdictContinue = "continue"
)

// nftTable is what the reader needs of one kube-proxy table: a small
// intermediate form that both the JSON parser (offline, `nft -j`) and the
// netlink reader (live) produce, so that both paths yield the same Observed.
type nftTable struct {
	Family model.IPFamily
	// Maps holds the verdict maps by name (only those in nftReaderMaps).
	Maps map[string][]nftElem
	// ClusterIPs is the content of the cluster-ips set (absent before kube-proxy 1.31).
	ClusterIPs map[netip.Addr]bool
	// HasClusterIPSet tells an empty cluster-ips set from a missing one.
	HasClusterIPSet bool
	// Chains holds rules by chain name. The JSON path fills every chain; the
	// live path fills chains as the walk reaches them (see nftChainSource).
	Chains map[string][]nftRule
	// MapRefs counts rules referencing a named map ("vmap @service-ips").
	MapRefs map[string]int
	// Names are all the table's chains in the kernel, read or not, and
	// MaxChainHandle the highest of their handles (live path; nil when not
	// known): the message path of Reader.Update needs them (live_names.go).
	Names          map[string]bool
	MaxChainHandle uint64
}

func newNFTTable(fam model.IPFamily) *nftTable {
	return &nftTable{
		Family:     fam,
		Maps:       map[string][]nftElem{},
		ClusterIPs: map[netip.Addr]bool{},
		Chains:     map[string][]nftRule{},
		MapRefs:    map[string]int{},
	}
}

// nftElem is one element of a verdict map: key parts as nft prints them
// ("10.97.0.1", "tcp", "443"), the verdict, and the element comment.
type nftElem struct {
	Key     []string
	Verdict nftVerdict
	Comment string
}

// String renders the element as `nft list` does.
func (e nftElem) String() string {
	s := strings.Join(e.Key, " . ")
	if e.Comment != "" {
		s += ` comment "` + e.Comment + `"`
	}
	return s + " : " + e.Verdict.String()
}

// nftVerdict is a verdict: Kind is one of the nftVerdict* constants; Target
// is the chain of a goto or jump.
type nftVerdict struct {
	Kind   string
	Target string
}

func (v nftVerdict) String() string {
	if v.Target != "" {
		return v.Kind + " " + v.Target
	}
	return v.Kind
}

// nftRule is one rule reduced to what decides where a new connection goes.
type nftRule struct {
	Handle uint64
	// Conditional: the rule matches on something other than the layer-4
	// protocol (source address, affinity set, fib, mark...). A packet from
	// outside the cluster with no affinity entry skips such rules.
	Conditional bool
	// Proto is the protocol of a "meta l4proto X" match, if any.
	Proto string
	// DNAT lists the destinations of a dnat statement: one address, or the
	// values of a "numgen ... map".
	DNAT []netip.AddrPort
	// VMap lists the verdicts of an anonymous "numgen ... vmap".
	VMap []nftVerdict
	// Verdict is the rule's final verdict statement; Kind "" when none.
	Verdict nftVerdict
	// MapRef names a named map the rule looks up ("vmap @service-ips").
	MapRef  string
	Comment string
	// text caches String (set by normalize once the rule is complete).
	text string
}

// String renders the rule in a canonical nft-like form used as evidence.
// It is built from the reduced form so that the JSON and netlink paths
// render the same text.
func (r nftRule) String() string {
	if r.text != "" {
		return r.text
	}
	return r.render()
}

func (r nftRule) render() string {
	var parts []string
	if r.Conditional {
		parts = append(parts, "<match>")
	}
	if r.Proto != "" {
		parts = append(parts, "meta l4proto "+r.Proto)
	}
	if r.MapRef != "" {
		parts = append(parts, "vmap @"+r.MapRef)
	}
	switch {
	case len(r.DNAT) == 1:
		parts = append(parts, "dnat to "+r.DNAT[0].String())
	case len(r.DNAT) > 1:
		parts = append(parts, "dnat to numgen map { "+joinAddrPorts(r.DNAT)+" }")
	}
	if len(r.VMap) > 0 {
		vs := make([]string, len(r.VMap))
		for i, v := range r.VMap {
			vs[i] = v.String()
		}
		parts = append(parts, "numgen vmap { "+strings.Join(vs, ", ")+" }")
	}
	if r.Verdict.Kind != "" {
		parts = append(parts, r.Verdict.String())
	}
	if r.Comment != "" {
		parts = append(parts, `comment "`+r.Comment+`"`)
	}
	return strings.Join(parts, " ")
}

func joinAddrPorts(as []netip.AddrPort) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
