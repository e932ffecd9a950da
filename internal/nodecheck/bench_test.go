package nodecheck

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// benchInputs builds a host-gw node in a cluster of nodes nodes (one /24
// each), 100 pods, a service per 10 nodes, and flows conntrack entries of
// which one in ten goes to a removed backend.
func benchInputs(nodes, flows int) Inputs {
	in := Inputs{NodeName: "n0", Snapshot: &model.NodeSnapshot{Links: baseLinks()}, Desired: map[model.Frontend]model.Verdict{}}
	for i := 0; i < nodes; i++ {
		cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + i/256), byte(i % 256), 0}), 24)
		ip := netip.AddrFrom4([4]byte{192, 168, byte(i / 256), byte(i%256 + 1)})
		in.Nodes = append(in.Nodes, model.NodeInfo{Name: fmt.Sprintf("n%d", i), PodCIDRs: []netip.Prefix{cidr},
			Addresses: []netip.Addr{ip}, Ready: true, ReadySince: now.Add(-time.Hour)})
		if i > 0 {
			in.Snapshot.Routes = append(in.Snapshot.Routes, model.Route{Dst: cidr, Type: model.RouteUnicast, Table: model.MainTable, Gateway: ip, Dev: "eth0"})
		}
	}
	for i := 0; i < 100; i++ {
		a := netip.AddrFrom4([4]byte{10, 100, 0, byte(i + 2)})
		in.Pods = append(in.Pods, model.PodInfo{Namespace: "x", Name: fmt.Sprintf("p%d", i), NodeName: "n0", IPs: []netip.Addr{a}})
		in.Snapshot.Routes = append(in.Snapshot.Routes, model.Route{Dst: netip.PrefixFrom(a, 32), Type: model.RouteUnicast, Table: model.MainTable, Dev: fmt.Sprintf("cali%d", i)})
		l := veth(fmt.Sprintf("cali%d", i), i)
		in.Snapshot.Links = append(in.Snapshot.Links, l)
	}
	var fes []model.Frontend
	for s := 0; s < nodes/10+1; s++ {
		fe := model.NewFrontend(netip.AddrFrom4([4]byte{10, 96, byte(s / 256), byte(s % 256)}), 80, model.TCP, model.ClusterIP)
		b := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 100, 1, byte(s % 250)}), 8080)
		in.Desired[fe] = model.Verdict{Service: model.ServicePort{ServiceName: model.ServiceName{Namespace: "x", Name: fmt.Sprintf("s%d", s)}},
			Action: model.Forward, Backends: []netip.AddrPort{b}}
		fes = append(fes, fe)
	}
	for i := 0; i < flows; i++ {
		fe := fes[i%len(fes)]
		v := in.Desired[fe]
		reply := v.Backends[0]
		if i%10 == 0 {
			reply = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 100, 9, 9}), 8080)
		}
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 100, 0, byte(i%100 + 2)}), uint16(1024+i%60000))
		in.Snapshot.Flows = append(in.Snapshot.Flows, model.Flow{Protocol: model.TCP, TCPState: "ESTABLISHED",
			Orig: model.Tuple{Src: src, Dst: netip.AddrPortFrom(fe.IP, fe.Port)}, Reply: model.Tuple{Src: reply, Dst: src}})
	}
	return in
}

func BenchmarkCheck(b *testing.B) {
	for _, c := range []struct{ nodes, flows int }{{100, 10_000}, {1000, 100_000}, {5000, 100_000}} {
		in := benchInputs(c.nodes, c.flows)
		b.Run(fmt.Sprintf("nodes=%d/flows=%d", c.nodes, c.flows), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fs, info := Check(in, Config{}, now)
				if len(fs) != c.nodes/10+1 || info.StaleConntrack[model.TCP] != c.flows/10 {
					b.Fatalf("%d findings, %v", len(fs), info.StaleConntrack)
				}
			}
		})
	}
}
