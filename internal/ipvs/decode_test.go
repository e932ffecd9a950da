package ipvs

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/model"
)

// moduleDir returns a fake /sys/module with ip_vs "loaded".
func moduleDir(t *testing.T) string {
	d := t.TempDir()
	if err := os.Mkdir(filepath.Join(d, "ip_vs"), 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func svc(af uint16, ip string, proto uint16, port uint16, sched string) *mobyipvs.Service {
	return &mobyipvs.Service{AddressFamily: af, Address: net.ParseIP(ip), Protocol: proto, Port: port, SchedName: sched}
}

func dst(af uint16, ip string, port uint16, w int) *mobyipvs.Destination {
	a := net.ParseIP(ip)
	if af == unix.AF_INET { // the kernel sends 4 bytes for IPv4
		a = a.To4()
	}
	return &mobyipvs.Destination{AddressFamily: af, Address: a, Port: port, Weight: w, ConnectionFlags: mobyipvs.ConnFwdMasq}
}

// kubeProxyFake holds, as netlink structs, the same state as
// testdata/kube-proxy.save, with its VIPs bound on kube-ipvs0.
func kubeProxyFake(t *testing.T) *Fake {
	t.Helper()
	data, err := os.ReadFile("testdata/kube-proxy.save")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ParseSave(data)
	if err != nil {
		t.Fatal(err)
	}
	f := &Fake{Dests: map[*mobyipvs.Service][]*mobyipvs.Destination{}, Links: map[string][]netip.Addr{DefaultLink: nil}}
	for _, vs := range tab.Services {
		af := uint16(unix.AF_INET)
		if vs.Family == model.IPv6 {
			af = unix.AF_INET6
		}
		s := &mobyipvs.Service{AddressFamily: af, FWMark: vs.FWMark, SchedName: vs.Scheduler}
		if vs.Persistent {
			s.Flags, s.Timeout = svcFlagPersistent, vs.Timeout
		}
		if vs.FWMark == 0 {
			s.Address = net.IP(vs.Addr.Addr().AsSlice())
			s.Port = vs.Addr.Port()
			s.Protocol = map[model.Protocol]uint16{model.TCP: unix.IPPROTO_TCP, model.UDP: unix.IPPROTO_UDP, model.SCTP: unix.IPPROTO_SCTP}[vs.Protocol]
			if vs.Addr.Port() != 30080 { // node ports sit on node addresses
				f.Links[DefaultLink] = append(f.Links[DefaultLink], vs.Addr.Addr())
			}
		}
		f.Svcs = append(f.Svcs, s)
		for _, r := range vs.Reals {
			f.Dests[s] = append(f.Dests[s], dst(map[bool]uint16{true: unix.AF_INET, false: unix.AF_INET6}[r.Addr.Addr().Is4()], r.Addr.Addr().String(), r.Addr.Port(), r.Weight))
		}
	}
	return f
}

// The netlink path and the ipvsadm text path must produce the same model.
func TestNetlinkMatchesSave(t *testing.T) {
	f := kubeProxyFake(t)
	r := NewReader(Config{NetNS: "nd-test", SysModuleDir: moduleDir(t), Hints: kubeProxyHints(), Open: f.Opener()})
	obs, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !f.Closed {
		t.Error("kernel handle not closed")
	}
	golden(t, "kube-proxy.json.golden", render(t, obs))
}

func TestReaderNetnsPath(t *testing.T) {
	var got []string
	open := func(p string) (Kernel, error) {
		got = append(got, p)
		return &Fake{Links: map[string][]netip.Addr{}}, nil
	}
	mod := moduleDir(t)
	for _, ns := range []string{"", "nd-x", "/proc/1/ns/net"} {
		if _, err := NewReader(Config{NetNS: ns, SysModuleDir: mod, Open: open}).Snapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"", "/run/netns/nd-x", "/proc/1/ns/net"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("netns paths %q, want %q", got, want)
	}
}

func TestReaderLinkAddrs(t *testing.T) {
	s := svc(unix.AF_INET, "10.97.0.1", unix.IPPROTO_TCP, 443, "rr")
	f := &Fake{
		Svcs:  []*mobyipvs.Service{s},
		Dests: map[*mobyipvs.Service][]*mobyipvs.Destination{s: {dst(unix.AF_INET, "10.0.0.10", 6443, 1)}},
		Links: map[string][]netip.Addr{DefaultLink: {netip.MustParseAddr("10.97.0.9")}},
	}
	r := NewReader(Config{SysModuleDir: moduleDir(t), Open: f.Opener()})
	tab, err := r.Table(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !tab.LinkFound || len(tab.IdleVIPs()) != 1 || tab.IdleVIPs()[0].String() != "10.97.0.9" {
		t.Errorf("table %+v", tab)
	}
	obs := Build(tab, Options{})
	fe := model.NewFrontend(netip.MustParseAddr("10.97.0.1"), 443, model.TCP, model.ClusterIP)
	if v := obs.Frontends[fe]; !strings.Contains(strings.Join(v.Evidence, "\n"), unboundNote) || len(obs.Warnings) != 1 {
		t.Errorf("unbound VIP not reported: %+v %q", v, obs.Warnings)
	}

	delete(f.Links, DefaultLink)
	tab, err = r.Table(context.Background())
	if err != nil || tab.LinkFound || tab.LinkAddrs == nil || len(tab.LinkAddrs) != 0 {
		t.Errorf("missing link: table %+v err %v", tab, err)
	}
}

func TestReaderErrors(t *testing.T) {
	ctx := context.Background()
	r := NewReader(Config{SysModuleDir: t.TempDir(), Open: (&Fake{}).Opener()})
	if _, err := r.Snapshot(ctx); !errors.Is(err, model.ErrUnsupported) {
		t.Errorf("no ip_vs module: err = %v, want ErrUnsupported", err)
	}
	boom := errors.New("boom")
	r = NewReader(Config{SysModuleDir: moduleDir(t), Open: (&Fake{Err: boom}).Opener()})
	if _, err := r.Snapshot(ctx); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
	r = NewReader(Config{SysModuleDir: moduleDir(t), Open: func(string) (Kernel, error) { return nil, boom }})
	if _, err := r.Snapshot(ctx); !errors.Is(err, boom) || !strings.Contains(err.Error(), "open netlink") {
		t.Errorf("err = %v, want open error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Snapshot(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want canceled", err)
	}
	if r.Name() != model.ModeIPVS {
		t.Errorf("Name() = %q", r.Name())
	}
}

func TestDecodeService(t *testing.T) {
	cases := []struct {
		name    string
		s       *mobyipvs.Service
		d       []*mobyipvs.Destination
		want    string // FormatSave of the one-service table
		wantErr string
	}{
		{"ipv4 16-byte address", svc(unix.AF_INET, "10.97.0.1", unix.IPPROTO_TCP, 443, "rr"),
			[]*mobyipvs.Destination{dst(unix.AF_INET, "10.0.0.10", 6443, 1)},
			"-A -t 10.97.0.1:443 -s rr\n-a -t 10.97.0.1:443 -r 10.0.0.10:6443 -m -w 1\n", ""},
		{"ipv6 udp draining", svc(unix.AF_INET6, "fd00::a", unix.IPPROTO_UDP, 53, "rr"),
			[]*mobyipvs.Destination{dst(unix.AF_INET6, "fd00:1::5", 53, 0)},
			"-A -u [fd00::a]:53 -s rr\n-a -u [fd00::a]:53 -r [fd00:1::5]:53 -m -w 0\n", ""},
		{"sctp, destination without family", svc(unix.AF_INET, "10.97.0.2", unix.IPPROTO_SCTP, 9, "sh"),
			[]*mobyipvs.Destination{{Address: net.IP{10, 1, 0, 1}, Port: 9, Weight: 2, ConnectionFlags: mobyipvs.ConnFwdTunnel}},
			"-A --sctp-service 10.97.0.2:9 -s sh\n-a --sctp-service 10.97.0.2:9 -r 10.1.0.1:9 -i -w 2\n", ""},
		{"persistent", &mobyipvs.Service{AddressFamily: unix.AF_INET, Address: net.IP{10, 97, 0, 3}, Protocol: unix.IPPROTO_TCP, Port: 80, SchedName: "rr", Flags: svcFlagPersistent, Timeout: 10800},
			nil, "-A -t 10.97.0.3:80 -s rr -p 10800\n", ""},
		{"fwmark", &mobyipvs.Service{AddressFamily: unix.AF_INET6, FWMark: 9, SchedName: "rr"}, nil, "-A -f 9 -6 -s rr\n", ""},
		{"bad family", svc(99, "10.97.0.1", unix.IPPROTO_TCP, 80, "rr"), nil, "", "unknown address family 99"},
		{"bad protocol", svc(unix.AF_INET, "10.97.0.1", 1, 80, "rr"), nil, "", "unknown IP protocol 1"},
		{"short address", &mobyipvs.Service{AddressFamily: unix.AF_INET, Address: net.IP{10, 97}, Protocol: unix.IPPROTO_TCP}, nil, "", "bad address"},
		{"v6 address in v4 service", svc(unix.AF_INET, "fd00::1", unix.IPPROTO_TCP, 80, "rr"), nil, "", "IPv4 service with address fd00::1"},
		{"bad destination", svc(unix.AF_INET, "10.97.0.1", unix.IPPROTO_TCP, 80, "rr"),
			[]*mobyipvs.Destination{{AddressFamily: 77, Address: net.IP{1, 2, 3, 4}}}, "", "real server of -t 10.97.0.1:80: unknown address family 77"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs, err := decodeService(c.s, c.d)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(FormatSave(Table{Services: []VirtualServer{vs}})); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestForwardName(t *testing.T) {
	for flags, want := range map[uint32]string{
		mobyipvs.ConnFwdMasq: ForwardMasq, mobyipvs.ConnFwdLocalNode: ForwardLocal,
		mobyipvs.ConnFwdTunnel: ForwardTunnel, mobyipvs.ConnFwdDirectRoute: ForwardRoute,
		mobyipvs.ConnFwdBypass: ForwardBypass, 0x100 | mobyipvs.ConnFwdTunnel: ForwardTunnel,
	} {
		if got := forwardName(flags); got != want {
			t.Errorf("forwardName(%#x) = %q, want %q", flags, got, want)
		}
	}
}

func TestOptionsFor(t *testing.T) {
	vip := model.NewFrontend(netip.MustParseAddr("203.0.113.7"), 443, model.TCP, model.LoadBalancer)
	np := model.NewNodePort(30080, model.TCP, model.IPv4)
	sp := model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "frontend"}, Port: "https", Protocol: model.TCP}
	o := OptionsFor(model.HintsFor(model.Desired{Frontends: map[model.Frontend]model.Verdict{vip: {Service: sp}, np: {Service: sp}}}))
	if o.Kinds[vip.IP] != model.LoadBalancer || !o.NodePorts[PortKey{30080, model.TCP}] || o.Services[np] != sp || len(o.Kinds) != 1 {
		t.Errorf("options %+v", o)
	}
}
