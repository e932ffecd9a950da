package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/model"
)

// TestIPTablesNFTUnchangedSkipsDump: with iptables-nft, an unchanged
// nf_tables generation serves the cached observation; any change forces a dump.
func TestIPTablesNFTUnchangedSkipsDump(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	for _, tool := range []string{"ip", "iptables-nft-restore", "iptables-nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	ns := fmt.Sprintf("nd-cmd-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
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
	restore := exec.Command("ip", "netns", "exec", ns, "iptables-nft-restore")
	restore.Stdin = strings.NewReader(rules)
	if out, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("iptables-nft-restore: %v %s", err, out)
	}
	src, err := newSource(model.ModeIPTables, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	src.ipt.Config.Backend = datapath.BackendNFT
	ctx := context.Background()
	first, err := src.Snapshot(ctx)
	if err != nil || len(first.Frontends) != 1 {
		t.Fatalf("first read: %v, %d frontends", err, len(first.Frontends))
	}
	at := src.ipt.Stats().At
	if _, err := src.Snapshot(ctx); err != nil || !src.ipt.Stats().At.Equal(at) {
		t.Fatalf("unchanged ruleset dumped again (err %v)", err)
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "iptables-nft", "-t", "nat", "-F", "KUBE-SVC-AAAAAAAAAAAAAAAA").CombinedOutput(); err != nil {
		t.Fatalf("flush: %v %s", err, out)
	}
	after, err := src.Snapshot(ctx)
	if err != nil || src.ipt.Stats().At.Equal(at) {
		t.Fatalf("changed ruleset not dumped again (err %v)", err)
	}
	for fe, v := range after.Frontends {
		if len(v.Backends) != 0 {
			t.Fatalf("flushed chain still has backends: %s %+v", fe, v)
		}
	}
}
