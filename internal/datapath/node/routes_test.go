package node

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/golden"
)

// checkNodeGolden compares got with testdata/nodestate/NAME, or rewrites it with -update.
func checkNodeGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), []byte(got))
}

func ipnet(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

var testLinkNames = map[int]string{1: "lo", 2: "eth0", 3: "cni0", 4: "flannel.1", 5: "cali1234", 6: "tunl0"}

func testNetlinkRoutes() []netlink.Route {
	return []netlink.Route{
		{Family: unix.AF_INET, Type: unix.RTN_UNICAST, Table: 254, Protocol: 16, LinkIndex: 2, Gw: net.ParseIP("192.168.1.1")},
		{Family: unix.AF_INET, Type: unix.RTN_UNICAST, Table: 254, Protocol: 2, LinkIndex: 3, Dst: ipnet("10.244.0.0/24")},
		{Family: unix.AF_INET, Type: unix.RTN_UNICAST, Table: 254, Protocol: 3, LinkIndex: 2, Dst: ipnet("10.244.1.0/24"), Gw: net.ParseIP("192.168.1.11")},
		{Family: unix.AF_INET, Type: unix.RTN_UNICAST, Table: 254, Protocol: 3, LinkIndex: 4, Dst: ipnet("10.244.2.0/24"),
			Gw: net.ParseIP("10.244.2.0").To4(), Flags: unix.RTNH_F_ONLINK},
		{Family: unix.AF_INET, Type: unix.RTN_UNICAST, Table: 254, Protocol: 4, LinkIndex: 5, Dst: ipnet("10.244.64.7/32"), Flags: unix.RTNH_F_LINKDOWN},
		{Family: unix.AF_INET, Type: unix.RTN_BLACKHOLE, Table: 254, Protocol: 12, Dst: ipnet("10.244.64.0/26")},
		{Family: unix.AF_INET, Type: unix.RTN_UNREACHABLE, Table: 254, Protocol: 4, Dst: ipnet("10.244.65.0/26")},
		{Family: unix.AF_INET, Type: unix.RTN_PROHIBIT, Table: 254, Protocol: 4, Dst: ipnet("10.244.66.0/26")},
		{Family: unix.AF_INET, Type: unix.RTN_UNICAST, Table: 254, Protocol: 12, Dst: ipnet("10.244.128.0/26"),
			MultiPath: []*netlink.NexthopInfo{
				{LinkIndex: 6, Gw: net.ParseIP("192.168.1.11"), Flags: unix.RTNH_F_ONLINK},
				{LinkIndex: 6, Gw: net.ParseIP("192.168.1.12"), Flags: unix.RTNH_F_ONLINK | unix.RTNH_F_LINKDOWN},
				nil}},
		{Family: unix.AF_INET, Type: unix.RTN_UNICAST, Table: 254, Protocol: 80, LinkIndex: 2, Dst: ipnet("10.244.3.0/24"),
			Via: &netlink.Via{AddrFamily: unix.AF_INET6, Addr: net.ParseIP("fe80::1")}},
		{Family: unix.AF_INET, Type: unix.RTN_LOCAL, Table: 255, Protocol: 2, LinkIndex: 2, Dst: ipnet("192.168.1.10/32")},
		{Family: unix.AF_INET6, Type: unix.RTN_UNICAST, Table: 254, Protocol: 9, LinkIndex: 2, Gw: net.ParseIP("fe80::1")},
		{Family: unix.AF_INET6, Type: unix.RTN_UNICAST, Table: 254, Protocol: 3, LinkIndex: 2, Dst: ipnet("fd00:10:244:1::/64"), Gw: net.ParseIP("fd00:192::11")},
		{Family: unix.AF_INET6, Type: unix.RTN_UNICAST, Table: 100, Protocol: 250, LinkIndex: 99, Dst: ipnet("fd00:10:244:9::/64")},
		{Family: unix.AF_INET, Type: unix.RTN_BROADCAST, Table: 255, Protocol: 2, LinkIndex: 3, Dst: ipnet("10.244.0.255/32")},
	}
}

func renderRoutes(rs []model.Route) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%-11s %-70s linkdown=%v\n", r.Type, r.String(), r.LinkDown)
	}
	return b.String()
}

func TestRoutesFromNetlinkGolden(t *testing.T) {
	got := routesFromNetlink(testNetlinkRoutes(), testLinkNames)
	checkNodeGolden(t, "routes.golden", renderRoutes(got))
	// spot checks that do not depend on the golden file
	if got[0].Dst.String() != "0.0.0.0/0" || got[0].Gateway.String() != "192.168.1.1" || got[0].Protocol != "dhcp" {
		t.Errorf("default route: %+v", got[0])
	}
	if !got[3].OnLink || got[3].Gateway.String() != "10.244.2.0" {
		t.Errorf("onlink route: %+v", got[3])
	}
	if !got[4].LinkDown || !got[8].LinkDown || len(got[8].NextHops) != 2 {
		t.Errorf("linkdown flags / multipath: %+v %+v", got[4], got[8])
	}
	if got[9].Gateway.String() != "fe80::1" {
		t.Errorf("via: %+v", got[9])
	}
	if got[11].Dst.String() != "::/0" || got[13].Dev != "" || got[13].Protocol != "250" {
		t.Errorf("v6 default / unknown link: %+v %+v", got[11], got[13])
	}
}
