package cli

import (
	"bytes"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
)

// TestResolveVIPs: a Service's cluster or load-balancer IP is replaced by
// its endpoints' addresses (terminating ones included), with --port mapped
// from the Service's port to its endpoints'; other addresses stay; a VIP
// without endpoints or a port the Service lacks is refused. The cluster is
// the real kube-proxy v1.37 fixture.
func TestResolveVIPs(t *testing.T) {
	cs, err := clusterfile.LoadFiles(fixture.Path(t, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	for _, c := range []struct {
		name     string
		ips      []netip.Addr
		port     uint16
		want     []netip.Addr
		wantPort uint16
		services []vipBackends
		err      string
	}{
		{name: "cluster_ip", ips: addrs("10.97.233.167"), want: addrs("10.214.1.41", "10.214.2.41", "10.214.2.42"),
			services: []vipBackends{{"10.97.233.167", "shop/cart", []string{"10.214.1.41", "10.214.2.41", "10.214.2.42"}}}},
		{name: "service_port_to_target_port", ips: addrs("10.97.233.167"), port: 9090, want: addrs("10.214.1.41", "10.214.2.41", "10.214.2.42"),
			wantPort: 50051, services: []vipBackends{{"10.97.233.167", "shop/cart", []string{"10.214.1.41", "10.214.2.41", "10.214.2.42"}}}},
		{name: "load_balancer_ip_and_a_pod_ip", ips: addrs("192.0.2.100", "10.214.9.9"), want: addrs("10.214.1.31", "10.214.2.31", "10.214.2.32", "10.214.9.9"),
			services: []vipBackends{{"192.0.2.100", "shop/frontend", []string{"10.214.1.31", "10.214.2.31", "10.214.2.32"}}}},
		{name: "pod_ip_only", ips: addrs("10.214.1.41"), port: 50051, want: addrs("10.214.1.41"), wantPort: 50051},
		{name: "no_endpoints", ips: addrs("10.97.230.30"), err: "--ip 10.97.230.30 is Service shop/payments's address, and that Service has no endpoints"},
		{name: "unknown_service_port", ips: addrs("10.97.233.167"), port: 50051, err: "the Service has no port 50051"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, port, svcs, err := resolveVIPs(cs, c.ips, c.port)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) || port != c.wantPort || !reflect.DeepEqual(svcs, c.services) {
				t.Fatalf("got %v port %d %+v %v; want %v port %d %+v", got, port, svcs, err, c.want, c.wantPort, c.services)
			}
		})
	}
}

// TestTraceRSTsRefusesUnresolvableVIP: the command refuses a Service
// address without backends before it loads the probe (no privileges
// needed), with one line and nothing on stdout.
func TestTraceRSTsRefusesUnresolvableVIP(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(Env{}, []string{"trace-rsts", "--ip", "10.97.230.30", "--cluster", fixture.Path(t, "cluster.json"), "--duration", "1s"}, &out, &errb)
	if code != ExitError || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 ||
		!strings.Contains(errb.String(), "Service shop/payments's address, and that Service has no endpoints") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

func TestDescribeVIPs(t *testing.T) {
	got := describeVIPs([]vipBackends{{"10.97.233.167", "shop/cart", []string{"10.214.1.41", "10.214.2.41"}}})
	if want := "10.97.233.167 is Service shop/cart: watching its 2 backends 10.214.1.41, 10.214.2.41\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
