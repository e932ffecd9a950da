package iptables

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// Chains kube-proxy's iptables mode enters Service traffic through.
const (
	chainServices     = "KUBE-SERVICES"
	chainNodePorts    = "KUBE-NODEPORTS"
	chainExtServices  = "KUBE-EXTERNAL-SERVICES"
	chainProxyFW      = "KUBE-PROXY-FIREWALL"
	maxChainDepth     = 16
	evidenceChainNote = "chain "
)

// walker maps one family's dump to frontends.
type walker struct {
	fam     model.IPFamily
	tag     string // evidence prefix: "" for IPv4, "ip6 " for IPv6
	nat     *ipTable
	filter  *ipTable
	idx     *parseIndex
	entries map[model.Frontend]*entry
	order   []model.Frontend
	cache   map[string]*chainResult
	// inProgress marks a chain being resolved in cache (loop detection).
	inProgress chainResult
	warnings   []string
	// track: record in deps every nat chain the walk looks at (the view's
	// per-frontend dependencies, view.go).
	track bool
	deps  []string
	// odd: a jump loop, or nesting that comes near maxChainDepth: chain
	// results then depend on the order chains are first reached, so only a
	// full walk in rule order gives the full walk's answer.
	odd bool
}

// entry accumulates what the rules say about one frontend.
type entry struct {
	svc          model.ServicePort
	natSeen      bool   // a nat rule captures the frontend
	general      bool   // captured by a rule not limited to loopback
	chain        string // the chain the capturing nat rule jumps to
	backends     []netip.AddrPort
	drop         bool // the nat chains mark it for dropping (KUBE-MARK-DROP) and DNAT nowhere
	filterAction model.Action
	evidence     []string
}

// chainResult is what traffic entering a chain (from outside) is DNATed to.
type chainResult struct {
	backends []netip.AddrPort
	drop     bool // KUBE-MARK-DROP reached before any DNAT
	evidence []string
	svc      *model.ServicePort // from the chain's own comments, if any (shared, never changed)
	// warns: the warnings resolving the chain gave, its sub-chains'
	// included; a walk that reaches the chain again gives them again (the
	// final dedupe keeps the first), so a frontend's warnings do not depend
	// on which frontend reached a shared chain first.
	warns []string
	// chains: with tracking, the nat chains the result depends on (itself,
	// its sub-chains, missing jump targets).
	chains []string
	height int // nesting below the chain (0: it resolves no sub-chain)
}

func newWalker(fam model.IPFamily, tag string, d ipDump, idx *parseIndex) *walker {
	w := &walker{fam: fam, tag: tag, nat: d["nat"], filter: d["filter"], idx: idx,
		entries: map[model.Frontend]*entry{}}
	if w.nat == nil {
		w.warnf("no nat table in the dump")
		w.nat = &ipTable{name: "nat", chains: map[string]*ipChain{}}
	}
	if w.filter == nil {
		w.warnf("no filter table in the dump")
		w.filter = &ipTable{name: "filter", chains: map[string]*ipChain{}}
	}
	return w
}

func (w *walker) warnf(format string, args ...any) {
	w.warnings = append(w.warnings, fmt.Sprintf("%s: ", w.fam)+fmt.Sprintf(format, args...))
}

// ev is a rule's evidence: its text, prefixed with the table unless nat
// (most evidence; kept as a substring of the dump, no copy) and with "ip6"
// for IPv6 rules.
func (w *walker) ev(table string, r *ipRule) string {
	if table == "nat" && w.tag == "" {
		return r.text
	}
	if table == "nat" {
		return strings.TrimSpace(w.tag) + ": " + r.text
	}
	return w.tag + table + ": " + r.text
}

// run walks the nat entry chains, then the filter verdict chains.
func (w *walker) run() {
	if w.nat.chain(chainServices) == nil {
		w.warnf("nat table has no %s chain: kube-proxy (iptables mode) state absent", chainServices)
	}
	jumpsToNodePorts := false
	for _, r := range w.nat.rules(chainServices) {
		if r.target() == chainNodePorts {
			jumpsToNodePorts = true
			continue
		}
		w.natServiceRule(r)
	}
	if len(w.nat.rules(chainNodePorts)) > 0 && !jumpsToNodePorts {
		w.warnf("nat %s is not reached from %s: node ports are not programmed", chainNodePorts, chainServices)
	} else {
		for _, r := range w.nat.rules(chainNodePorts) {
			w.natNodePortRule(r)
		}
	}
	for _, c := range []string{chainServices, chainExtServices, chainNodePorts} {
		for _, r := range w.filter.rules(c) {
			w.filterRule(r)
		}
	}
	for _, r := range w.filter.rules(chainProxyFW) {
		w.firewallRule(r)
	}
	w.warnings = dedupe(w.warnings)
}

// ruleKey builds the address/port/protocol a rule matches, if it names one.
func (w *walker) ruleKey(r *ipRule, needIP bool) (frontKey, bool) { return ruleKey(r, needIP) }

// ruleKey reads the address (when needIP), port and protocol of a rule.
func ruleKey(r *ipRule, needIP bool) (frontKey, bool) {
	proto, err := model.ParseProtocol(r.proto())
	if err != nil {
		return frontKey{}, false
	}
	port, err := strconv.ParseUint(r.dport(), 10, 16)
	if err != nil || port == 0 {
		return frontKey{}, false
	}
	k := frontKey{port: uint16(port), proto: proto}
	if !needIP {
		return k, true
	}
	ip, ok := hostAddr(r.dst())
	if !ok || r.has(flDstNeg) {
		return frontKey{}, false
	}
	k.ip = ip
	return k, true
}

// hostAddr parses "a.b.c.d", "a.b.c.d/32" or an IPv6 host address.
func hostAddr(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if strings.IndexByte(s, '/') >= 0 {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Bits() != p.Addr().BitLen() {
			return netip.Addr{}, false
		}
		return p.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// isLoopbackNet reports whether a -d value is a loopback network
// (kube-proxy's "127.0.0.0/8" localhost node-port rules).
func isLoopbackNet(s string) bool {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, err2 := netip.ParseAddr(s)
		return err2 == nil && a.IsLoopback()
	}
	return p.Addr().IsLoopback()
}

// commentService reads the service port from a kube-proxy comment: its first
// word when that is "ns/name[:port]".
func commentService(comment string, proto model.Protocol) (model.ServicePort, bool) {
	word := comment
	if i := strings.IndexByte(comment, ' '); i >= 0 {
		word = comment[:i]
	}
	return parseKubePortName(word, proto)
}

// entryFor returns the entry of a frontend, creating it in order.
func (w *walker) entryFor(f model.Frontend) *entry {
	e := w.entries[f]
	if e == nil {
		e = &entry{}
		w.entries[f] = e
		w.order = append(w.order, f)
	}
	return e
}
