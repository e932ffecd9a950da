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
		{"ipvs beats iptables", detectFindings{ipvs: "link kube-ipvs0 exists", iptables: "KUBE-SERVICES"}, model.ModeIPVS, "kube-ipvs0"},
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
			cmd := exec.Command("ip", "netns", "exec", ns, bin)
			f, err := os.Open("testdata/detect-kube-services.iptables")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd.Stdin = f
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v: %s", bin, err, out)
			}
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
		{"ipvs link", func(t *testing.T, ns string) {
			// kube-proxy makes a dummy link; this kernel may lack the dummy
			// driver, and detection looks only at the name, so a veth will do.
			netnstest.Run(t, ns, "ip", "link", "add", "kube-ipvs0", "type", "veth", "peer", "name", "ipvs-peer")
		}, ModeDetector{}, model.ModeIPVS, "kube-ipvs0"},
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

// TestDetectModeOnlyReads checks detection creates no legacy nat table in a
// namespace that had none (asking iptables-legacy would create one).
func TestDetectModeOnlyReads(t *testing.T) {
	ns := newTestNetns(t)
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
