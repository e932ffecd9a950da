package ipvs

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

func TestParseSaveGolden(t *testing.T) {
	cases := []struct {
		name string
		opts Options
	}{
		{"kube-proxy", kubeProxyOptions()},
		{"kube-proxy-no-options", Options{}},
		{"empty", Options{}},
		{"ipvsadm-flags", Options{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := strings.TrimSuffix(c.name, "-no-options") + ".save"
			data, err := os.ReadFile(filepath.Join("testdata", in))
			if err != nil {
				t.Fatal(err)
			}
			tab, err := ParseSave(data)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".json.golden", render(t, Build(tab, c.opts)))
		})
	}
}

func TestParseSaveKubeProxySemantics(t *testing.T) {
	data, err := os.ReadFile("testdata/kube-proxy.save")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ParseSave(data)
	if err != nil {
		t.Fatal(err)
	}
	obs := Build(tab, kubeProxyOptions())
	if obs.Datapath != model.ModeIPVS {
		t.Errorf("datapath %q", obs.Datapath)
	}
	ap := netip.MustParseAddrPort
	cart := obs.Frontends[model.NewFrontend(netip.MustParseAddr("10.97.12.7"), 80, model.TCP, model.ClusterIP)]
	if cart.Action != model.Forward || len(cart.Backends) != 2 || cart.HasBackend(ap("10.214.1.41:50051")) {
		t.Errorf("cart: weight-0 real server must not be a backend: %+v", cart)
	}
	if !strings.Contains(strings.Join(cart.Evidence, "\n"), "10.214.1.41:50051 -m -w 0"+drainingNote) {
		t.Errorf("cart: draining real server missing from evidence: %q", cart.Evidence)
	}
	for _, ip := range []string{"10.97.30.3", "10.97.40.4"} { // none / only draining
		fe := model.NewFrontend(netip.MustParseAddr(ip), map[string]uint16{"10.97.30.3": 443, "10.97.40.4": 80}[ip], model.TCP, model.ClusterIP)
		if v, ok := obs.Frontends[fe]; !ok || v.Action != model.Reject || len(v.Backends) != 0 {
			t.Errorf("%s: want reject without backends, got %+v (present %v)", fe, v, ok)
		}
	}
	np, ok := obs.Frontends[model.NewNodePort(30080, model.TCP, model.IPv4)]
	if !ok || len(np.Backends) != 2 || np.Service.Name != "search" {
		t.Errorf("node port 30080: %+v", np)
	}
	if len(obs.Warnings) != 2 { // fwmark + node ports disagreeing
		t.Errorf("warnings: %q", obs.Warnings)
	}
	lb := model.NewFrontend(netip.MustParseAddr("203.0.113.7"), 443, model.TCP, model.LoadBalancer)
	if _, ok := obs.Frontends[lb]; !ok {
		t.Errorf("load balancer frontend missing")
	}
}

func TestParseSaveErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"-A -t 10.0.0.1:80 -s rr\n-X -t 10.0.0.1:80", `line 2 "-X -t 10.0.0.1:80": unknown command "-X"`},
		{"-A -t kubernetes.default:https -s rr", `line 1 "-A -t kubernetes.default:https -s rr": virtual service: "kubernetes.default:https" is not a numeric address[:port] (use ipvsadm -Sn)`},
		{"-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1", "line 1 \"-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\": real server for virtual server -t 10.0.0.1:80, which no earlier -A line adds"},
		{"-A -t 10.0.0.1:80 -s rr\n-A -t 10.0.0.1:80 -s rr", "line 2"},
		{"-A -t 10.0.0.1:80 -s", "option -s needs a value"},
		{"-A -t 10.0.0.1:80 -s rr --bogus", `unknown option "--bogus"`},
		{"-A -s rr", "no virtual service"},
		{"-A -t 10.0.0.1:80 -u 10.0.0.1:53", "more than one virtual service"},
		{"-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -w x", `line 2 "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -w x": bad weight "x"`},
		{"-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -w 1", "-a without -r"},
		{"-A -t 10.0.0.1:80 -r 10.1.0.1:80", "-r given with -A"},
		{"-A -f 0 -s rr", `bad firewall mark "0"`},
		{"-A -t 10.0.0.1:80 -s rr\n\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -w 1\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -w 1", "line 4"},
	}
	for _, c := range cases {
		_, err := ParseSave([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSave(%q) error = %v, want it to contain %q", c.in, err, c.want)
		}
	}
}

func TestFormatSaveRoundTrip(t *testing.T) {
	for _, name := range []string{"kube-proxy.save", "ipvsadm-flags.save"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		tab, err := ParseSave(data)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseSave(FormatSave(tab))
		if err != nil {
			t.Fatalf("%s: re-parse: %v", name, err)
		}
		if a, b := string(FormatSave(tab)), string(FormatSave(again)); a != b {
			t.Errorf("%s: round trip changed:\n%s\nvs\n%s", name, a, b)
		}
	}
}

func TestIdleVIPs(t *testing.T) {
	tab := Table{
		Services:  []VirtualServer{{Addr: netip.MustParseAddrPort("10.97.0.1:443"), Protocol: model.TCP}},
		LinkAddrs: []netip.Addr{netip.MustParseAddr("10.97.9.9"), netip.MustParseAddr("10.97.0.1"), netip.MustParseAddr("10.97.0.5")},
	}
	got := tab.IdleVIPs()
	if len(got) != 2 || got[0].String() != "10.97.0.5" || got[1].String() != "10.97.9.9" {
		t.Errorf("IdleVIPs = %v", got)
	}
}
