package capture

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

// TestObserveRefusesCapturesWithoutKubeProxy: a capture without any
// kube-proxy rule is refused with one line naming the captures to take;
// the smallest captures that hold kube-proxy rules are read.
func TestObserveRefusesCapturesWithoutKubeProxy(t *testing.T) {
	emptySave := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
	kubeSave := "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-NODEPORTS - [0:0]\n" +
		"-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\nCOMMIT\n"
	emptyNFT := `{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}]}`
	for _, c := range []struct {
		name    string
		content string
		files   func(p string) Files
		want    string // "" read
	}{
		{"empty_iptables_save", emptySave, func(p string) Files { return Files{IPTables: p} },
			"holds no kube-proxy rules (no rule in chain KUBE-SERVICES)"},
		{"empty_file_iptables", "", func(p string) Files { return Files{IPTables: p} }, "holds no kube-proxy rules"},
		{"empty_ip6tables_save", emptySave, func(p string) Files { return Files{IP6Tables: p} }, "--ip6tables-save"},
		{"empty_nft_ruleset", emptyNFT, func(p string) Files { return Files{NFTJSON: p} }, "holds no table ip or ip6 kube-proxy"},
		{"empty_ipvsadm", "", func(p string) Files { return Files{IPVSAdm: p} }, "holds no IPVS virtual server"},
		{"kube_proxy_iptables_save", kubeSave, func(p string) Files { return Files{IPTables: p} }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "dump")
			if err := os.WriteFile(p, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			obs, err := Observe(context.Background(), c.files(p), model.Desired{})
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if obs.Datapath != model.ModeIPTables {
					t.Fatalf("datapath %q", obs.Datapath)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") ||
				!strings.Contains(err.Error(), p) {
				t.Fatalf("got %v, want one line naming %s and containing %q", err, p, c.want)
			}
		})
	}
}

func TestHasKubeServicesRule(t *testing.T) {
	for text, want := range map[string]bool{
		"-A KUBE-SERVICES -j KUBE-NODEPORTS\n":                          true,
		"*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j X\nCOMMIT\n": true,
		"\t  -A KUBE-SERVICES -j X\n":                                   true,
		"-I KUBE-SERVICES 1 -j X":                                       true,
		":KUBE-SERVICES - [0:0]\n":                                      false,
		"-A FOO -m comment --comment \"-A KUBE-SERVICES \" -j X\n":      false,
		"-A KUBE-SERVICES-X -j Y\n":                                     false,
		"":                                                              false,
	} {
		if got := hasKubeServicesRule([]byte(text)); got != want {
			t.Errorf("%q: %v, want %v", text, got, want)
		}
	}
}
