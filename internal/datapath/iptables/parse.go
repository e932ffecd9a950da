package iptables

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/netdrift/netdrift/internal/model"
)

// Dumps holds iptables-save text (or kube-proxy's iptables-restore
// input) for each family. Each must contain the nat and filter tables; other
// tables are accepted and ignored. IPv6 is nil when IPv6 is not read.
type Dumps struct {
	IPv4 []byte
	IPv6 []byte
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
		d, err := parseDump(string(fd.text))
		if err != nil {
			return model.Observed{}, fmt.Errorf("%s dump: %w", fd.fam, err)
		}
		w := newWalker(fd.fam, fd.tag, d, idx)
		w.run()
		for f, v := range w.verdicts() {
			obs.Frontends[f] = v
		}
		obs.Warnings = append(obs.Warnings, w.warnings...)
	}
	return obs, nil
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
