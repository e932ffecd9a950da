package cilium

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

// The listing's format is that of Cilium v1.20.2's `cilium-dbg bpf lb list`
// (cilium-dbg/cmd/bpf_lb_list.go: the services map key's String(), then
// per slot either the master's "[flags]" or the backend address); the
// addresses in testdata are made up.
func TestParseLBListForms(t *testing.T) {
	for _, file := range []string{"testdata/lb-list.json", "testdata/lb-list.txt"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			obs, err := ParseLBList(data, model.Hints{})
			if err != nil {
				t.Fatal(err)
			}
			want := map[model.Frontend][]netip.AddrPort{
				model.NewFrontend(netip.MustParseAddr("10.96.0.10"), 53, model.UDP, model.ClusterIP): {
					netip.MustParseAddrPort("10.244.1.2:53"), netip.MustParseAddrPort("10.244.2.3:53")},
				model.NewFrontend(netip.MustParseAddr("10.96.0.20"), 80, model.TCP, model.ClusterIP): nil,
				model.NewNodePort(30080, model.TCP, model.IPv4):                                      {netip.MustParseAddrPort("10.244.1.7:8080")},
				model.NewFrontend(netip.MustParseAddr("fd00::10"), 443, model.TCP, model.ClusterIP): {
					netip.MustParseAddrPort("[fd00:244::2]:8443")},
			}
			if len(obs.Frontends) != len(want) {
				t.Fatalf("frontends %v", obs.Frontends)
			}
			for fe, bs := range want {
				v, ok := obs.Frontends[fe]
				if !ok || !slices.Equal(v.Backends, bs) {
					t.Errorf("%v: %+v, want %v", fe, v, bs)
				}
			}
			if v := obs.Frontends[model.NewFrontend(netip.MustParseAddr("10.96.0.20"), 80, model.TCP, model.ClusterIP)]; v.Action != model.Reject {
				t.Errorf("no backends: action %s", v.Action)
			}
			np := obs.Frontends[model.NewNodePort(30080, model.TCP, model.IPv4)]
			if !strings.Contains(strings.Join(np.Evidence, " "), "internal scope (traffic policy Local): 2 backends") {
				t.Errorf("node port evidence %q", np.Evidence)
			}
			if !strings.Contains(strings.Join(obs.Warnings, " "), "does not say which slots are parked") {
				t.Errorf("warnings %q", obs.Warnings)
			}
		})
	}
}

func TestParseLBListRefuses(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"service list", "ID   Frontend            Service Type   Backend\n1    10.96.0.1:443/TCP   ClusterIP      1 => 172.18.0.2:6443/TCP (active)\n", "not the output of `cilium-dbg bpf lb list`"},
		{"bad json", "{\"a\": 1}", "not the JSON"},
		{"bad key", `{"10.96.0.10 (0)": ["0.0.0.0:0 (5) (0) [ClusterIP]"]}`, "no /protocol"},
		{"unknown flag", `{"10.96.0.10:80/TCP (0)": ["0.0.0.0:0 (5) (0) [ClusterIP, frobnicated]"]}`, "unknown service flag"},
		{"missing backend", `{"10.96.0.10:80/TCP (1)": ["backend 12 not found"]}`, "missing from the backends map"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseLBList([]byte(c.in), model.Hints{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want %q", err, c.want)
			}
			if c.name == "empty" || c.name == "service list" {
				if !strings.Contains(err.Error(), "cilium-dbg bpf lb list -o json") {
					t.Errorf("no command to run in %v", err)
				}
			}
		})
	}
}
