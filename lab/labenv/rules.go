package labenv

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// ProgrammedBackends reads what kube-proxy on node has programmed for the
// ClusterIP frontend ip:port (tcp) and returns the backends "IP:PORT",
// sorted. A frontend with no service chain yields nil. It only reads.
func (l *Lab) ProgrammedBackends(node, ip string, port int) ([]string, error) {
	if l.opts.ProxyMode == "cilium" {
		i, err := l.index(node)
		if err != nil {
			return nil, err
		}
		return l.ciliumBackends(i, ip, port)
	}
	if l.opts.ProxyMode == "nftables" {
		out, err := l.Exec(node, "nft", "list", "table", "ip", "kube-proxy")
		if err != nil {
			return nil, err
		}
		return parseNFTBackends(string(out), ip, port)
	}
	save := "iptables-save"
	if b := l.opts.IPTablesBackend; b != "" {
		save = "iptables-" + b + "-save"
	}
	out, err := l.Exec(node, save, "-t", "nat")
	if err != nil {
		return nil, err
	}
	return parseIPTablesBackends(string(out), ip, port)
}

var (
	arrowRE = regexp.MustCompile(`-> ([0-9.]+:[0-9]+)"`)
	dnatRE  = regexp.MustCompile(`^-A (KUBE-SEP-[A-Z0-9]+) .*-j DNAT .*--to-destination ([0-9.]+:[0-9]+)`)
)

// parseIPTablesBackends finds the KUBE-SVC chain KUBE-SERVICES sends
// ip:port to and returns the "-> IP:PORT" backends its KUBE-SEP jumps name,
// or, without comments (kube-proxy drops them above 1,000 endpoints), the
// DNAT targets of the KUBE-SEP chains it jumps to.
func parseIPTablesBackends(save, ip string, port int) ([]string, error) {
	lines := strings.Split(save, "\n")
	dst, dport := "-d "+ip+"/32 ", fmt.Sprintf("--dport %d ", port)
	var chain string
	for _, ln := range lines {
		if strings.HasPrefix(ln, "-A KUBE-SERVICES ") && strings.Contains(ln, dst) && strings.Contains(ln, dport) {
			if i := strings.Index(ln, "-j KUBE-SVC-"); i >= 0 {
				chain = strings.TrimSpace(ln[i+3:])
			}
		}
	}
	if chain == "" {
		return nil, nil
	}
	dnat := map[string]string{}
	for _, ln := range lines {
		if m := dnatRE.FindStringSubmatch(ln); m != nil {
			dnat[m[1]] = m[2]
		}
	}
	var out []string
	for n, ln := range lines {
		i := strings.Index(ln, "-j KUBE-SEP-")
		if !strings.HasPrefix(ln, "-A "+chain+" ") || i < 0 {
			continue
		}
		if m := arrowRE.FindStringSubmatch(ln); m != nil {
			out = append(out, m[1])
			continue
		}
		sep := strings.TrimSpace(ln[i+3:])
		if to, ok := dnat[sep]; ok {
			out = append(out, to)
			continue
		}
		return nil, fmt.Errorf("line %d: endpoint jump to %s: no \"-> IP:PORT\" comment and no DNAT in that chain: %s", n+1, sep, ln)
	}
	sort.Strings(out)
	return out, nil
}

var (
	nftMapRE  = regexp.MustCompile(`([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+) \. ([0-9]+)`)
	nftDnatRE = regexp.MustCompile(`dnat (?:ip )?to ([0-9.]+:[0-9]+)`)
)

// parseNFTBackends finds the service chain the service-ips map sends
// ip . tcp . port to, and returns the DNAT targets in that chain.
func parseNFTBackends(ruleset, ip string, port int) ([]string, error) {
	lines := strings.Split(ruleset, "\n")
	key := fmt.Sprintf("%s . tcp . %d : goto ", ip, port)
	var chain string
	for _, ln := range lines {
		if i := strings.Index(ln, key); i >= 0 {
			chain = strings.TrimRight(strings.TrimSpace(ln[i+len(key):]), ",}")
			chain = strings.TrimSpace(chain)
		}
	}
	if chain == "" {
		return nil, nil
	}
	var out []string
	in := false
	for _, ln := range lines {
		t := strings.TrimSpace(ln)
		if t == "chain "+chain+" {" {
			in = true
			continue
		}
		if !in {
			continue
		}
		if t == "}" {
			break
		}
		if m := nftDnatRE.FindStringSubmatch(t); m != nil {
			out = append(out, m[1])
		}
		if strings.Contains(t, "numgen") {
			for _, m := range nftMapRE.FindAllStringSubmatch(t, -1) {
				out = append(out, m[1]+":"+m[2])
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
