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
	if l.opts.ProxyMode == "nftables" {
		out, err := l.Exec(node, "nft", "list", "table", "ip", "kube-proxy")
		if err != nil {
			return nil, err
		}
		return parseNFTBackends(string(out), ip, port)
	}
	out, err := l.Exec(node, "iptables-save", "-t", "nat")
	if err != nil {
		return nil, err
	}
	return parseIPTablesBackends(string(out), ip, port)
}

var arrowRE = regexp.MustCompile(`-> ([0-9.]+:[0-9]+)"`)

// parseIPTablesBackends finds the KUBE-SVC chain KUBE-SERVICES sends
// ip:port to and returns the "-> IP:PORT" backends its KUBE-SEP jumps name.
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
	var out []string
	for n, ln := range lines {
		if !strings.HasPrefix(ln, "-A "+chain+" ") || !strings.Contains(ln, "-j KUBE-SEP-") {
			continue
		}
		m := arrowRE.FindStringSubmatch(ln)
		if m == nil {
			return nil, fmt.Errorf("line %d: endpoint jump without a \"-> IP:PORT\" comment: %s", n+1, ln)
		}
		out = append(out, m[1])
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
