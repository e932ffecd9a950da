package datapath

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

func TestDecideMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    detectFindings
		want string
		has  string
	}{
		{"nothing", detectFindings{}, model.ModeNone, "Cilium"},
		{"ipvs beats iptables", detectFindings{ipvs: "link kube-ipvs0 and IPVS-mode rules", iptables: "KUBE-SERVICES"}, model.ModeIPVS, "kube-ipvs0"},
		{"nft with services beats iptables", detectFindings{nft: "nftables table ip kube-proxy", nftServices: 3, iptables: "KUBE-SERVICES"}, model.ModeNFTables, "also found"},
		{"empty nft table loses to iptables", detectFindings{nft: "nftables table ip kube-proxy", iptables: "KUBE-SERVICES x"}, model.ModeIPTables, "KUBE-SERVICES x"},
		{"iptables only", detectFindings{iptables: "KUBE-SERVICES y"}, model.ModeIPTables, "KUBE-SERVICES y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mode, reason := decideMode(tc.f)
			if mode != tc.want || !strings.Contains(reason, tc.has) {
				t.Errorf("got %s (%s), want %s containing %q", mode, reason, tc.want, tc.has)
			}
		})
	}
}

type fakeIPVS struct {
	n   int
	err error
}

func (f fakeIPVS) CountServices(string) (int, error) { return f.n, f.err }

// TestDetectModeNamespaces runs detection on namespaces holding each kind of
// kube-proxy state, written with the real tools.
func TestDetectModeNamespaces(t *testing.T) {
	netnstest.RequireRoot(t, "creates network namespaces and loads rules in them")
	restore := func(bin string) func(t *testing.T, ns string) {
		return func(t *testing.T, ns string) {
			text, err := os.ReadFile("testdata/detect-kube-services.iptables")
			if err != nil {
				t.Fatal(err)
			}
			restoreText(t, ns, bin, string(text))
		}
	}
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, ns string)
		det     ModeDetector
		want    string
		reasonH string
	}{
		{"none", func(*testing.T, string) {}, ModeDetector{}, model.ModeNone, "no kube-proxy state"},
		{"nftables", func(t *testing.T, ns string) {
			netnstest.Run(t, ns, "nft", "-f", "nftables/testdata/handwritten.v4.nft")
		}, ModeDetector{}, model.ModeNFTables, "ip kube-proxy (4 service-ips elements)"},
		{"dual-stack nftables", func(t *testing.T, ns string) {
			netnstest.Run(t, ns, "nft", "-f", "nftables/testdata/handwritten.v4.nft")
			netnstest.Run(t, ns, "nft", "-f", "nftables/testdata/handwritten.v6.nft")
		}, ModeDetector{}, model.ModeNFTables, "ip kube-proxy and ip6 kube-proxy"},
		{"iptables nft backend", restore("iptables-nft-restore"), ModeDetector{}, model.ModeIPTables, "nft backend"},
		{"iptables legacy backend", restore("iptables-legacy-restore"), ModeDetector{}, model.ModeIPTables, "legacy backend"},
		{"leftover ipvs link alone", ipvsLink, ModeDetector{}, model.ModeNone, "no kube-proxy state"},
		{"leftover ipvs link and iptables-mode rules", func(t *testing.T, ns string) {
			ipvsLink(t, ns)
			restore("iptables-nft-restore")(t, ns)
		}, ModeDetector{}, model.ModeIPTables, "nft backend"},
		{"leftover ipvs link and legacy iptables-mode rules", func(t *testing.T, ns string) {
			ipvsLink(t, ns)
			restore("iptables-legacy-restore")(t, ns)
		}, ModeDetector{}, model.ModeIPTables, "legacy backend"},
		{"leftover ipvs link and nftables", func(t *testing.T, ns string) {
			ipvsLink(t, ns)
			netnstest.Run(t, ns, "nft", "-f", "nftables/testdata/handwritten.v4.nft")
		}, ModeDetector{}, model.ModeNFTables, "ip kube-proxy"},
		{"ipvs link and IPVS-mode rules", func(t *testing.T, ns string) {
			ipvsLink(t, ns)
			restoreText(t, ns, "iptables-nft-restore", ipvsModeRules)
		}, ModeDetector{}, model.ModeIPVS, "IPVS-mode rules"},
		{"ipvs virtual servers", func(*testing.T, string) {}, ModeDetector{IPVS: fakeIPVS{n: 2}}, model.ModeIPVS, "2 IPVS virtual servers"},
		{"nftables and leftover iptables", func(t *testing.T, ns string) {
			netnstest.Run(t, ns, "nft", "-f", "nftables/testdata/handwritten.v4.nft")
			restore("iptables-nft-restore")(t, ns)
		}, ModeDetector{}, model.ModeNFTables, "also found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newTestNetns(t)
			tc.setup(t, ns)
			mode, reason, err := tc.det.Detect(context.Background(), ns)
			if err != nil {
				t.Fatal(err)
			}
			if mode != tc.want || !strings.Contains(reason, tc.reasonH) {
				t.Errorf("got %s (%s), want %s with %q", mode, reason, tc.want, tc.reasonH)
			}
		})
	}
}

// ipvsModeRules is nat KUBE-SERVICES as kube-proxy's IPVS mode writes it,
// reduced to a rule that needs no ipset: the jump to KUBE-NODE-PORT.
const ipvsModeRules = `*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-NODE-PORT - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
COMMIT
`

// restoreText loads iptables-restore input into ns with bin.
func restoreText(t *testing.T, ns, bin, text string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, bin)
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", bin, err, out)
	}
}

// ipvsLink adds the link kube-proxy's IPVS mode makes, kube-ipvs0: a dummy
// link, or a veth pair where the kernel lacks the dummy driver (detection
// looks only at the name).
func ipvsLink(t *testing.T, ns string) {
	t.Helper()
	if exec.Command("ip", "-n", ns, "link", "add", "kube-ipvs0", "type", "dummy").Run() == nil {
		return
	}
	netnstest.Run(t, ns, "ip", "link", "add", "kube-ipvs0", "type", "veth", "peer", "name", "ipvs-peer")
}

// TestDetectModeOnlyReads checks detection creates no legacy nat table in a
// namespace that had none (asking iptables-legacy would create one), nor
// any nftables state, even when a kube-ipvs0 link makes it read the rules.
func TestDetectModeOnlyReads(t *testing.T) {
	ns := newTestNetns(t)
	ipvsLink(t, ns)
	if _, _, err := DetectMode(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	names, err := nsutil.ReadProcNet(ns, "ip_tables_names")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(names, "nat") {
		t.Errorf("detection created a legacy nat table: %q", names)
	}
	if out := netnstest.Run(t, ns, "nft", "list", "ruleset"); len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("detection created nftables state:\n%s", out)
	}
}

func TestDetectModeIPVSError(t *testing.T) {
	netnstest.RequireRoot(t, "creates network namespaces and loads rules in them")
	ns := newTestNetns(t)
	_, _, err := ModeDetector{IPVS: fakeIPVS{err: errors.New("boom")}}.Detect(context.Background(), ns)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("want the IPVS error, got %v", err)
	}
}

// newTestNetns creates a fresh network namespace, deleted at cleanup.
func newTestNetns(t *testing.T) string {
	t.Helper()
	netnstest.RequireRoot(t, "creates network namespaces and loads rules in them")
	return netnstest.New(t, "nd-dp")
}
