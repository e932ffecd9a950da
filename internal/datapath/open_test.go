package datapath

import (
	"context"
	"os/exec"
	"testing"

	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// TestIPTablesNFTUnchangedSkipsDump: with iptables-nft, an unchanged
// nf_tables generation serves the cached observation; any change forces a dump.
func TestIPTablesNFTUnchangedSkipsDump(t *testing.T) {
	for _, tool := range []string{"ip", "iptables-nft-restore", "iptables-nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	ns := newTestNetns(t)
	rules := `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A OUTPUT -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "shop/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA
-A KUBE-SVC-AAAAAAAAAAAAAAAA -m comment --comment "shop/web:http -> 10.1.0.1:8080" -j KUBE-SEP-BBBBBBBBBBBBBBBB
-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m comment --comment "shop/web:http" -m tcp -j DNAT --to-destination 10.1.0.1:8080
COMMIT
*filter
:INPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
COMMIT
`
	netnstest.RunInput(t, ns, rules, "iptables-nft-restore")
	src := &iptablesReader{r: &iptables.Reader{Config: iptables.Config{NetNS: ns, Backend: iptables.BackendNFT}}, netns: ns}
	ctx := context.Background()
	first, err := src.Snapshot(ctx)
	if err != nil || len(first.Frontends) != 1 {
		t.Fatalf("first read: %v, %d frontends", err, len(first.Frontends))
	}
	at := src.r.Stats().At
	if _, err := src.Snapshot(ctx); err != nil || !src.r.Stats().At.Equal(at) {
		t.Fatalf("unchanged ruleset dumped again (err %v)", err)
	}
	// New hints re-parse the cached dump: no new dump.
	src.SetHints(model.Hints{ServicePorts: []model.ServicePort{{Namespace: "shop", Name: "web", Port: "http", Protocol: model.TCP}}})
	if _, err := src.Snapshot(ctx); err != nil || !src.r.Stats().At.Equal(at) {
		t.Fatalf("new hints dumped again (err %v)", err)
	}
	netnstest.Run(t, ns, "iptables-nft", "-t", "nat", "-F", "KUBE-SVC-AAAAAAAAAAAAAAAA")
	after, err := src.Snapshot(ctx)
	if err != nil || src.r.Stats().At.Equal(at) {
		t.Fatalf("changed ruleset not dumped again (err %v)", err)
	}
	for fe, v := range after.Frontends {
		if len(v.Backends) != 0 {
			t.Fatalf("flushed chain still has backends: %s %+v", fe, v)
		}
	}
}
