package datapath

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// genLargeDump writes an iptables-save text as kube-proxy leaves it in a
// large cluster: services x endpoints, comments only on KUBE-SERVICES rules,
// rules grouped by chain as iptables-save prints them.
func genLargeDump(services, endpoints int) []byte {
	var decl, svcRules, sepRules, svcChains strings.Builder
	decl.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		":KUBE-MARK-MASQ - [0:0]\n:KUBE-NODEPORTS - [0:0]\n:KUBE-SERVICES - [0:0]\n")
	svcRules.WriteString("-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n")
	for s := 0; s < services; s++ {
		sp := model.ServicePort{Namespace: "bench", Name: fmt.Sprintf("s%05d", s), Port: "http", Protocol: model.TCP}
		svc := chainPrefixSVC + ChainHash(sp)
		vip := fmt.Sprintf("10.96.%d.%d", s/250, s%250+1)
		fmt.Fprintf(&decl, ":%s - [0:0]\n", svc)
		fmt.Fprintf(&svcRules, "-A KUBE-SERVICES -d %s/32 -p tcp -m comment --comment \"%s cluster IP\" -m tcp --dport 80 -j %s\n", vip, KubeProxyPortName(sp), svc)
		fmt.Fprintf(&svcChains, "-A %s ! -s 10.244.0.0/16 -d %s/32 -p tcp -m tcp --dport 80 -j KUBE-MARK-MASQ\n", svc, vip)
		for e := 0; e < endpoints; e++ {
			ep := fmt.Sprintf("10.%d.%d.%d:8080", 128+s/2500, (s/10)%250, (s%10)*25+e+1)
			sep := chainPrefixSEP + EndpointChainHash(sp, ep)
			fmt.Fprintf(&decl, ":%s - [0:0]\n", sep)
			if e < endpoints-1 {
				fmt.Fprintf(&svcChains, "-A %s -m statistic --mode random --probability %.11f -j %s\n", svc, 1/float64(endpoints-e), sep)
			} else {
				fmt.Fprintf(&svcChains, "-A %s -j %s\n", svc, sep)
			}
			fmt.Fprintf(&sepRules, "-A %s -s %s/32 -j KUBE-MARK-MASQ\n", sep, ep[:strings.IndexByte(ep, ':')])
			fmt.Fprintf(&sepRules, "-A %s -p tcp -m tcp -j DNAT --to-destination %s\n", sep, ep)
		}
	}
	svcRules.WriteString("-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n")
	filter := "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-EXTERNAL-SERVICES - [0:0]\nCOMMIT\n"
	return []byte(filter + decl.String() + sepRules.String() + svcRules.String() + svcChains.String() + "COMMIT\n")
}

func TestGenLargeDumpParses(t *testing.T) {
	obs, err := ParseIPTables(IPTablesDumps{IPv4: genLargeDump(20, 5)}, ParseOptions{})
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
		obs, err := ParseIPTables(IPTablesDumps{IPv4: dump}, ParseOptions{})
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
