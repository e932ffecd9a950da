package iptables

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// genLargeDump writes an iptables-save text as kube-proxy leaves it in a
// large cluster: services x endpoints, comments only on KUBE-SERVICES rules.
// Like iptables-save, it declares the chains sorted and lists the rules
// grouped by chain in the same order.
func genLargeDump(services, endpoints int) []byte {
	rules := map[string][]string{}
	add := func(chain, format string, args ...any) {
		rules[chain] = append(rules[chain], "-A "+chain+" "+fmt.Sprintf(format, args...))
	}
	add("PREROUTING", "-m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES")
	rules["KUBE-MARK-MASQ"], rules["KUBE-NODEPORTS"] = nil, nil
	for s := 0; s < services; s++ {
		sp := model.ServicePort{ServiceName: model.ServiceName{Namespace: "bench", Name: fmt.Sprintf("s%05d", s)}, Port: "http", Protocol: model.TCP}
		svc := chainPrefixSVC + ChainHash(sp)
		vip := fmt.Sprintf("10.96.%d.%d", s/250, s%250+1)
		add("KUBE-SERVICES", "-d %s/32 -p tcp -m comment --comment \"%s cluster IP\" -m tcp --dport 80 -j %s", vip, KubeProxyPortName(sp), svc)
		add(svc, "! -s 10.244.0.0/16 -d %s/32 -p tcp -m tcp --dport 80 -j KUBE-MARK-MASQ", vip)
		for e := 0; e < endpoints; e++ {
			ep := fmt.Sprintf("10.%d.%d.%d:8080", 128+s/2500, (s/10)%250, (s%10)*25+e+1)
			sep := chainPrefixSEP + EndpointChainHash(sp, ep)
			if e < endpoints-1 {
				add(svc, "-m statistic --mode random --probability %.11f -j %s", 1/float64(endpoints-e), sep)
			} else {
				add(svc, "-j %s", sep)
			}
			add(sep, "-s %s/32 -j KUBE-MARK-MASQ", ep[:strings.IndexByte(ep, ':')])
			add(sep, "-p tcp -m tcp -j DNAT --to-destination %s", ep)
		}
	}
	add("KUBE-SERVICES", "-m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS")
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-EXTERNAL-SERVICES - [0:0]\nCOMMIT\n")
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	chains := make([]string, 0, len(rules))
	for c := range rules {
		if c != "PREROUTING" {
			chains = append(chains, c)
		}
	}
	slices.Sort(chains)
	for _, c := range chains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, c := range append([]string{"PREROUTING"}, chains...) {
		for _, r := range rules[c] {
			b.WriteString(r)
			b.WriteByte('\n')
		}
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String())
}

func TestGenLargeDumpParses(t *testing.T) {
	obs, err := Parse(Dumps{IPv4: genLargeDump(20, 5)}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Frontends) != 20 || len(obs.Warnings) != 0 {
		t.Fatalf("%d frontends, warnings %q", len(obs.Frontends), obs.Warnings)
	}
	for f, v := range obs.Frontends {
		if v.Action != model.Forward || len(v.Backends) != 5 || v.Service.Namespace != "bench" {
			t.Errorf("%s: %+v", f, v)
		}
	}
}

// BenchmarkParseIPTables100k parses 10,000 services x 10 endpoints
// (100,000 endpoints, ~430k lines) in large-cluster form.
func BenchmarkParseIPTables100k(b *testing.B) {
	dump := genLargeDump(10000, 10)
	b.SetBytes(int64(len(dump)))
	b.ReportAllocs()
	cpu0 := processCPU()
	n := 0
	for b.Loop() {
		obs, err := Parse(Dumps{IPv4: dump}, model.Hints{})
		if err != nil || len(obs.Frontends) != 10000 {
			b.Fatalf("%d frontends, %v", len(obs.Frontends), err)
		}
		n++
	}
	// CPU time is the honest figure on a shared machine, where wall time
	// includes waiting for a core (it includes the GC's work).
	b.ReportMetric(float64(processCPU()-cpu0)/float64(n)/1e6, "cpu-ms/op")
}

// processCPU is the user+system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
