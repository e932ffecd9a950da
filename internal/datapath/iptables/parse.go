package iptables

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"unsafe"

	"github.com/netdrift/netdrift/internal/model"
)

// Dumps holds iptables-save text (or kube-proxy's iptables-restore
// input) for each family. Each must contain the nat and filter tables; other
// tables are accepted and ignored. IPv6 is nil when IPv6 is not read.
type Dumps struct {
	IPv4 []byte
	IPv6 []byte
	// HandedOver: the caller never changes the bytes again, so the
	// observed state may share them instead of a copy (an offline diff's
	// file, read for this parse alone).
	HandedOver bool
}

// Parse maps kube-proxy's iptables rules to the observed state.
// It is pure: no kernel access. Malformed text is an error naming the line.
//
// Frontends come from nat KUBE-SERVICES (cluster, external and load-balancer
// IPs) and nat KUBE-NODEPORTS (node ports; the 127.0.0.0/8 duplicates add
// evidence only), followed through KUBE-FW (allowed sources), KUBE-EXT (the
// verdict for traffic from outside: source-conditional short-circuits to
// KUBE-SVC are skipped), KUBE-SVC/KUBE-SVL and KUBE-SEP to their DNAT
// targets. Filter-table REJECT/DROP rules (KUBE-SERVICES,
// KUBE-EXTERNAL-SERVICES, KUBE-NODEPORTS) give reject or drop where no DNAT
// applies. Chains nothing reachable jumps to are ignored. Evidence holds the
// rule text (nat rules as written, others prefixed with their table; "ip6"
// for IPv6) and shares memory with the dump.
func Parse(dumps Dumps, opts model.Hints) (model.Observed, error) {
	obs := model.Observed{Datapath: model.ModeIPTables, Frontends: map[model.Frontend]model.Verdict{}}
	idx := newParseIndex(opts)
	for _, fd := range []struct {
		fam  model.IPFamily
		text []byte
		tag  string
	}{{model.IPv4, dumps.IPv4, ""}, {model.IPv6, dumps.IPv6, "ip6 "}} {
		if fd.text == nil {
			continue
		}
		d, notes, err := readDump(dumps.text(fd.text))
		if err != nil {
			return model.Observed{}, fmt.Errorf("%s dump: %w", fd.fam, err)
		}
		w := newWalker(fd.fam, fd.tag, d, idx)
		w.warnings = append(w.warnings, prefixAll(string(fd.fam)+": ", notes)...)
		w.run()
		for f, v := range w.verdicts() {
			obs.Frontends[f] = v
		}
		obs.Warnings = append(obs.Warnings, w.warnings...)
	}
	return obs, nil
}

// text is b as the parse's string: a copy, or b itself when handed over.
func (d Dumps) text(b []byte) string {
	if d.HandedOver {
		return unsafe.String(unsafe.SliceData(b), len(b))
	}
	return string(b)
}

// readDump checks the format, parses the text and picks the one
// iptables-save output that holds kube-proxy's rules when the text holds
// several. The notes say what was read when it is not plain iptables-save.
func readDump(text string) (ipDump, []string, error) {
	text, notes, err := prepare(text)
	if err != nil {
		return nil, nil, err
	}
	parts, err := parseDumpParts(text)
	if err != nil {
		return nil, nil, err
	}
	d := parts[0].d
	if len(parts) > 1 {
		var with []dumpPart
		lines := make([]string, len(parts))
		for i, p := range parts {
			lines[i] = fmt.Sprint(p.line)
			if hasKubeProxyRules(p.d) {
				with = append(with, p)
			}
		}
		switch len(with) {
		case 0:
			notes = append(notes, fmt.Sprintf("the file holds %d iptables-save outputs (starting at lines %s), none with kube-proxy rules; read the first",
				len(parts), strings.Join(lines, ", ")))
		case 1:
			d = with[0].d
			notes = append(notes, fmt.Sprintf("the file holds %d iptables-save outputs (starting at lines %s: iptables-legacy-save and iptables-nft-save concatenated?); "+
				"only the one at line %d holds kube-proxy rules: read that one", len(parts), strings.Join(lines, ", "), with[0].line))
		default:
			return nil, nil, fmt.Errorf("line %d: a second iptables-save output (table %s again; the first output starts at line %d), and both hold kube-proxy rules "+
				"(iptables-legacy-save and iptables-nft-save concatenated?): capture only the backend kube-proxy uses "+
				"(`iptables -V` in the kube-proxy container says legacy or nf_tables) and pass that one", with[1].line, with[1].first, with[0].line)
		}
	}
	if line, ok := ipvsModeDump(d); ok {
		return nil, nil, fmt.Errorf("line %d: this node runs kube-proxy in IPVS mode (nat KUBE-SERVICES matches its ipsets and jumps to no "+
			"KUBE-SVC chain): Services live in IPVS, not in these rules; capture `ipvsadm -Sn` and pass it as --ipvsadm-save", line)
	}
	return d, notes, nil
}

// hasKubeProxyRules reports whether a dump holds kube-proxy rules: a
// non-empty KUBE-SERVICES chain in nat or filter.
func hasKubeProxyRules(d ipDump) bool {
	for _, t := range []string{"nat", "filter"} {
		if tb := d[t]; tb != nil && len(tb.rules(chainServices)) > 0 {
			return true
		}
	}
	return false
}

func prefixAll(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

// parseIndex is model.Hints prepared for lookups.
type parseIndex struct {
	byHash    map[string]model.ServicePort
	kinds     map[frontKey]model.FrontendKind
	frontends map[model.Frontend]model.ServicePort
}

// frontKey identifies an address, port and protocol regardless of kind.
type frontKey struct {
	ip    netip.Addr
	port  uint16
	proto model.Protocol
}

func newParseIndex(opts model.Hints) *parseIndex {
	idx := &parseIndex{byHash: map[string]model.ServicePort{}, kinds: map[frontKey]model.FrontendKind{},
		frontends: opts.Frontends}
	for _, sp := range opts.ServicePorts {
		idx.byHash[ChainHash(sp)] = sp
	}
	for f := range opts.Frontends {
		if f.Kind == model.ExternalIP || f.Kind == model.LoadBalancer {
			idx.kinds[frontKey{f.IP, f.Port, f.Protocol}] = f.Kind
		}
	}
	return idx
}

// dedupe removes repeated strings keeping first-seen order (evidence of a
// backend reached twice through session affinity, repeated warnings).
func dedupe(ws []string) []string {
	if len(ws) <= 32 {
		out := ws[:0]
	next:
		for _, w := range ws {
			for _, o := range out {
				if o == w {
					continue next
				}
			}
			out = append(out, w)
		}
		return out
	}
	seen := make(map[string]bool, len(ws))
	out := ws[:0]
	for _, w := range ws {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// sortStrings returns a sorted copy (for stable evidence of sets).
func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
