// Package bench measures what reading kube-proxy's datapath costs at scale,
// side by side with the tools any reader must run (iptables-save, nft -j).
// gen.go writes kube-proxy-shaped tables and the matching cluster state;
// the benchmarks are in reading_test.go. See BENCHMARKS.md.
package bench

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/model"
)

// Spec is a generated cluster: Services services of Endpoints endpoints
// each (one TCP port "http" 80 -> 8080); every NodePortEvery-th service is a
// NodePort service, every EmptyEvery-th has no endpoints (reject rules).
type Spec struct {
	Services, Endpoints       int
	NodePortEvery, EmptyEvery int
}

// Scales measured in BENCHMARKS.md: 1,000 services / 10,000 endpoints (the
// reference figures of docs/architecture.md, "Reading cost"), and ten times that.
var (
	Scale10k  = Spec{Services: 1000, Endpoints: 10, NodePortEvery: 10, EmptyEvery: 50}
	Scale100k = Spec{Services: 10000, Endpoints: 10, NodePortEvery: 10, EmptyEvery: 50}
)

// Service is one generated service.
type Service struct {
	Port      model.ServicePort
	ClusterIP netip.Addr
	NodePort  uint16 // 0: none
	Endpoints []netip.AddrPort
}

// List returns the services in a stable order.
func (s Spec) List() []Service {
	out := make([]Service, s.Services)
	for i := range out {
		v := Service{
			Port:      model.ServicePort{ServiceName: model.ServiceName{Namespace: fmt.Sprintf("ns%02d", i%50), Name: fmt.Sprintf("svc-%05d", i)}, Port: "http", Protocol: model.TCP},
			ClusterIP: netip.AddrFrom4([4]byte{10, 96, byte((i + 1) >> 8), byte(i + 1)}),
		}
		if s.NodePortEvery > 0 && i%s.NodePortEvery == 0 {
			v.NodePort = uint16(30000 + i/s.NodePortEvery)
		}
		if s.EmptyEvery == 0 || i%s.EmptyEvery != 1 {
			for e := 0; e < s.Endpoints; e++ {
				n := i*s.Endpoints + e
				v.Endpoints = append(v.Endpoints, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 128 + byte(n>>16), byte(n >> 8), byte(n)}), 8080))
			}
		}
		out[i] = v
	}
	return out
}

// EndpointCount is the number of endpoints of all services.
func (s Spec) EndpointCount() int {
	n := 0
	for _, v := range s.List() {
		n += len(v.Endpoints)
	}
	return n
}

// NodeIP is the generated node's address (node ports are served on it).
var NodeIP = netip.MustParseAddr("10.0.0.10")

const (
	podCIDR     = "10.128.0.0/9"
	serviceCIDR = "10.96.0.0/16"
)

// IPTablesRestore renders the filter and nat tables as kube-proxy's iptables
// mode writes them in a large cluster (more than 1,000 endpoints: no
// per-endpoint comments), in iptables-restore syntax.
func (s Spec) IPTablesRestore() string {
	var filter, nat iptBuf
	for _, c := range []string{"KUBE-NODEPORTS", "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD", "KUBE-SERVICES", "KUBE-PROXY-FIREWALL"} {
		filter.chain(c)
	}
	for _, c := range []string{"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-NODEPORTS"} {
		nat.chain(c)
	}
	filter.rule("INPUT", `-m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS`)
	filter.rule("INPUT", `-m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`)
	filter.rule("FORWARD", `-m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`)
	filter.rule("FORWARD", `-m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`)
	filter.rule("OUTPUT", `-m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`)
	filter.rule("KUBE-FORWARD", `-m conntrack --ctstate INVALID -j DROP`)
	filter.rule("KUBE-FORWARD", `-m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT`)
	filter.rule("KUBE-FORWARD", `-m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`)
	nat.rule("PREROUTING", `-m comment --comment "kubernetes service portals" -j KUBE-SERVICES`)
	nat.rule("OUTPUT", `-m comment --comment "kubernetes service portals" -j KUBE-SERVICES`)
	nat.rule("POSTROUTING", `-m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`)
	nat.rule("KUBE-MARK-MASQ", `-j MARK --set-xmark 0x4000/0x4000`)
	nat.rule("KUBE-POSTROUTING", `-m mark ! --mark 0x4000/0x4000 -j RETURN`)
	nat.rule("KUBE-POSTROUTING", `-j MARK --set-xmark 0x4000/0x0`)
	nat.rule("KUBE-POSTROUTING", `-m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`)
	for _, v := range s.List() {
		s.iptService(&filter, &nat, v)
	}
	nat.rule("KUBE-SERVICES", `-m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`)
	return filter.render("filter", "INPUT", "FORWARD", "OUTPUT") +
		nat.render("nat", "PREROUTING", "INPUT", "OUTPUT", "POSTROUTING")
}

func (s Spec) iptService(filter, nat *iptBuf, v Service) {
	name := iptables.KubeProxyPortName(v.Port)
	if len(v.Endpoints) == 0 {
		filter.rule("KUBE-SERVICES", `-d %s/32 -p tcp -m comment --comment "%s has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable`, v.ClusterIP, name)
		if v.NodePort != 0 {
			filter.rule("KUBE-EXTERNAL-SERVICES", `-p tcp -m comment --comment "%s has no endpoints" -m addrtype --dst-type LOCAL -m tcp --dport %d -j REJECT --reject-with icmp-port-unreachable`, name, v.NodePort)
		}
		return
	}
	svc := "KUBE-SVC-" + iptables.ChainHash(v.Port)
	nat.rule("KUBE-SERVICES", `-d %s/32 -p tcp -m comment --comment "%s cluster IP" -m tcp --dport 80 -j %s`, v.ClusterIP, name, svc)
	if v.NodePort != 0 {
		ext := "KUBE-EXT-" + iptables.ChainHash(v.Port)
		nat.rule("KUBE-NODEPORTS", `-p tcp -m comment --comment "%s" -m tcp --dport %d -j %s`, name, v.NodePort, ext)
		nat.rule(ext, `-m comment --comment "masquerade traffic for %s external destinations" -j KUBE-MARK-MASQ`, name)
		nat.rule(ext, `-j %s`, svc)
	}
	nat.rule(svc, `! -s %s -d %s/32 -p tcp -m comment --comment "%s cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`, podCIDR, v.ClusterIP, name)
	for i, ep := range v.Endpoints {
		sep := "KUBE-SEP-" + iptables.EndpointChainHash(v.Port, ep.String())
		if left := len(v.Endpoints) - i; left > 1 {
			nat.rule(svc, `-m statistic --mode random --probability %.11f -j %s`, 1/float64(left), sep)
		} else {
			nat.rule(svc, `-j %s`, sep)
		}
		nat.rule(sep, `-s %s/32 -j KUBE-MARK-MASQ`, ep.Addr())
		nat.rule(sep, `-p tcp -m tcp -j DNAT --to-destination %s`, ep)
	}
}

// iptBuf collects one table's chains and rules in insertion order.
type iptBuf struct {
	order []string
	rules map[string][]string
}

func (b *iptBuf) chain(name string) {
	if b.rules == nil {
		b.rules = map[string][]string{}
	}
	if _, ok := b.rules[name]; !ok {
		b.order = append(b.order, name)
		b.rules[name] = nil
	}
}

func (b *iptBuf) rule(chain, format string, args ...any) {
	b.chain(chain)
	b.rules[chain] = append(b.rules[chain], fmt.Sprintf("-A %s %s", chain, fmt.Sprintf(format, args...)))
}

// render writes the table: built-in chains first, then the declared user
// chains sorted (as iptables-save prints them), then the rules.
func (b *iptBuf) render(table string, builtin ...string) string {
	var w strings.Builder
	fmt.Fprintf(&w, "*%s\n", table)
	for _, c := range builtin {
		fmt.Fprintf(&w, ":%s ACCEPT [0:0]\n", c)
	}
	user := []string{}
	for _, c := range b.order {
		if !slices.Contains(builtin, c) {
			user = append(user, c)
		}
	}
	slices.Sort(user)
	for _, c := range user {
		fmt.Fprintf(&w, ":%s - [0:0]\n", c)
	}
	for _, c := range append(builtin, user...) {
		for _, r := range b.rules[c] {
			w.WriteString(r)
			w.WriteByte('\n')
		}
	}
	w.WriteString("COMMIT\n")
	return w.String()
}
