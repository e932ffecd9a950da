package ipvs

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/vmtest"
)

// TestIPVSInVM runs TestLiveIPVS inside a VM with Debian's 6.1 kernel (the
// host kernel may lack IPVS and dummy links).
func TestIPVSInVM(t *testing.T) {
	vmtest.RunOwnTests(t, "ipvs", []string{"TestLiveIPVS"},
		vmtest.Config{Files: map[string]string{"/work/ipvs/testdata": "testdata"}})
}

var nsCounter atomic.Int32

// newNetns creates a named network namespace removed at cleanup.
func newNetns(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("nd-ipvs-%d-%d", os.Getpid(), nsCounter.Add(1))
	sh(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	return name
}

func sh(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestLiveIPVS programs IPVS in a fresh netns with ipvsadm (the way
// kube-proxy's IPVS mode lays it out) and reads it back over netlink.
func TestLiveIPVS(t *testing.T) {
	if os.Getenv("NETDRIFT_IN_VM") != "1" {
		t.Skip("set NETDRIFT_IN_VM=1 to run against the running kernel (TestIPVSInVM does, inside a VM)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := os.Stat("/sys/module/ip_vs"); err != nil {
		t.Skip("kernel without ip_vs")
	}
	ns := newNetns(t)
	sh(t, "ip", "-n", ns, "link", "add", "kube-ipvs0", "type", "dummy")
	sh(t, "ip", "-n", ns, "link", "add", "eth0", "type", "dummy")
	sh(t, "ip", "-n", ns, "addr", "add", "10.0.0.11/24", "dev", "eth0")
	vips := []string{"10.97.0.1/32", "10.97.12.7/32", "10.97.30.3/32", "10.97.0.10/32", "10.97.50.5/32", "203.0.113.7/32", "10.97.9.9/32"}
	for _, v := range vips {
		sh(t, "ip", "-n", ns, "addr", "add", v, "dev", "kube-ipvs0")
	}
	sh(t, "ip", "-n", ns, "addr", "add", "fd00:97::12/128", "dev", "kube-ipvs0", "nodad")
	rules, err := os.ReadFile("testdata/live.save")
	if err != nil {
		t.Fatal(err)
	}
	restore := exec.Command("ip", "netns", "exec", ns, "ipvsadm", "-R")
	restore.Stdin = strings.NewReader(string(rules))
	if out, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("ipvsadm -R: %v\n%s", err, out)
	}

	r := NewReader(Config{NetNS: ns, Hints: kubeProxyHints()})
	tab, err := r.Table(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	obs, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkLiveObserved(t, obs)
	if got := tab.IdleVIPs(); len(got) != 1 || got[0] != netip.MustParseAddr("10.97.9.9") {
		t.Errorf("idle VIPs on kube-ipvs0 = %v, want [10.97.9.9]", got)
	}
	if !tab.LinkFound || len(tab.LinkAddrs) != len(vips)+1 {
		t.Errorf("kube-ipvs0 addresses = %v", tab.LinkAddrs)
	}

	// The real ipvsadm must print exactly what FormatSave renders, and its
	// text must parse into the same model as the netlink read.
	saved := sh(t, "ip", "netns", "exec", ns, "ipvsadm", "-Sn")
	if a, b := sortedLines(saved), sortedLines(string(FormatSave(tab))); a != b {
		t.Errorf("ipvsadm -Sn:\n%s\nFormatSave:\n%s", a, b)
	}
	textTab, err := ParseSave([]byte(saved))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := render(t, Build(textTab, kubeProxyOptions())), render(t, obs); string(a) != string(b) {
		t.Errorf("text path:\n%s\nnetlink path:\n%s", a, b)
	}

	// A real server's weight set to 0 (kube-proxy's graceful termination)
	// removes it from the backends at the next read.
	sh(t, "ip", "netns", "exec", ns, "ipvsadm", "-e", "-t", "10.97.0.1:443", "-r", "10.0.0.10:6443", "-m", "-w", "0")
	obs, err = r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	api := obs.Frontends[model.NewFrontend(netip.MustParseAddr("10.97.0.1"), 443, model.TCP, model.ClusterIP)]
	if api.Action != model.Reject || len(api.Backends) != 0 {
		t.Errorf("after weight 0: %+v", api)
	}
}

func checkLiveObserved(t *testing.T, obs model.Observed) {
	t.Helper()
	if len(obs.Frontends) != 8 || len(obs.Warnings) != 0 {
		t.Errorf("frontends %d, warnings %q", len(obs.Frontends), obs.Warnings)
	}
	ip := netip.MustParseAddr
	ap := netip.MustParseAddrPort
	want := map[model.Frontend][]netip.AddrPort{
		model.NewFrontend(ip("10.97.0.1"), 443, model.TCP, model.ClusterIP):      {ap("10.0.0.10:6443")},
		model.NewFrontend(ip("10.97.12.7"), 80, model.TCP, model.ClusterIP):      {ap("10.214.1.40:50051"), ap("10.214.2.40:50051")},
		model.NewFrontend(ip("10.97.30.3"), 443, model.TCP, model.ClusterIP):     nil,
		model.NewFrontend(ip("10.97.0.10"), 53, model.UDP, model.ClusterIP):      {ap("10.214.1.2:53")},
		model.NewFrontend(ip("10.97.50.5"), 9000, model.SCTP, model.ClusterIP):   nil,
		model.NewFrontend(ip("203.0.113.7"), 443, model.TCP, model.LoadBalancer): {ap("10.214.1.20:8443")},
		model.NewNodePort(30080, model.TCP, model.IPv4):                          {ap("10.214.1.20:8080")},
		model.NewFrontend(ip("fd00:97::12"), 80, model.TCP, model.ClusterIP):     {ap("[fd00:214:1::40]:50051")},
	}
	for fe, backends := range want {
		v, ok := obs.Frontends[fe]
		if !ok {
			t.Errorf("%s %s %s missing", fe.Kind, fe, fe.Protocol)
			continue
		}
		wantAction := model.Forward
		if len(backends) == 0 {
			wantAction = model.Reject
		}
		if v.Action != wantAction || fmt.Sprint(v.Backends) != fmt.Sprint(backends) {
			t.Errorf("%s %s: %s %v, want %s %v", fe, fe.Protocol, v.Action, v.Backends, wantAction, backends)
		}
	}
	cart := obs.Frontends[model.NewFrontend(ip("10.97.12.7"), 80, model.TCP, model.ClusterIP)]
	if cart.Service.Name != "cart" || !strings.Contains(strings.Join(cart.Evidence, "\n"), "10.214.1.41:50051 -m -w 0"+drainingNote) {
		t.Errorf("cart: %+v", cart)
	}
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
