package nodecheck

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/findingtest"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func pfx(s string) netip.Prefix {
	if !strings.Contains(s, "/") {
		a := netip.MustParseAddr(s)
		return netip.PrefixFrom(a, a.BitLen())
	}
	return netip.MustParsePrefix(s)
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, addr(s))
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, pfx(s))
	}
	return out
}

// node builds a Ready node: name, podCIDRs (comma separated, may be empty), addresses.
func node(name, cidrs string, as ...string) model.NodeInfo {
	n := model.NodeInfo{Name: name, Ready: true, ReadySince: now.Add(-time.Hour), Addresses: addrs(as...)}
	if cidrs != "" {
		n.PodCIDRs = prefixes(strings.Split(cidrs, ",")...)
	}
	return n
}

func pod(ns, name, nodeName string, ips ...string) model.PodInfo {
	return model.PodInfo{Namespace: ns, Name: name, NodeName: nodeName, IPs: addrs(ips...)}
}

// via builds a unicast main-table route "dst via gw dev dev".
func via(dst, gw, dev string) model.Route {
	r := model.Route{Dst: pfx(dst), Type: model.RouteUnicast, Table: model.MainTable, Protocol: "boot", Dev: dev}
	if gw != "" {
		r.Gateway = addr(gw)
	}
	return r
}

func onlink(r model.Route) model.Route { r.OnLink = true; return r }

func proto(r model.Route, p string) model.Route { r.Protocol = p; return r }

func reject(typ, dst, protocol string) model.Route {
	return model.Route{Dst: pfx(dst), Type: typ, Table: model.MainTable, Protocol: protocol}
}

func link(name, kind string, as ...string) model.Link {
	l := model.Link{Name: name, Kind: kind, AdminUp: true, OperState: "up", PeerNetnsID: -1}
	l.Addrs = prefixes(as...)
	return l
}

// veth builds a host-side veth whose peer is in netns id nsid.
func veth(name string, nsid int, peerAddrs ...string) model.Link {
	l := link(name, "veth")
	l.PeerNetnsID = nsid
	if peerAddrs != nil {
		l.PeerResolved = true
		l.PeerAddrs = addrs(peerAddrs...)
	}
	return l
}

func wantFindings(t *testing.T, fs []model.Finding, want ...string) {
	t.Helper()
	got := findingtest.Kinds(fs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("findings:\n got  %q\n want %q\ndetails:\n%s", got, want, details(fs))
	}
	for _, f := range fs {
		if f.Detail == "" || !strings.HasSuffix(f.Detail, ".") {
			t.Errorf("%s %s: detail %q is not a sentence", f.Kind, f.Subject, f.Detail)
		}
	}
}

func details(fs []model.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + string(f.Kind) + ": " + f.Detail + "\n")
		for _, e := range f.Evidence {
			b.WriteString("    " + e + "\n")
		}
	}
	return b.String()
}

func findDecision(info Info, fam model.IPFamily) RouteDecision {
	for _, d := range info.RouteModes {
		if d.Family == fam {
			return d
		}
	}
	return RouteDecision{}
}
