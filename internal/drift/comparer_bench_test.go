package drift

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

// benchState is a converged node: n frontends (one service port each) with
// 10 backends, desired and observed alike.
func benchState(n int) (model.Desired, model.Observed) {
	d := model.Desired{Frontends: make(map[model.Frontend]model.Verdict, n)}
	o := model.Observed{Datapath: model.ModeNFTables, Frontends: make(map[model.Frontend]model.Verdict, n), Version: 1}
	for i := 0; i < n; i++ {
		fe := model.NewFrontend(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), uint16(80+i>>16), model.TCP, model.ClusterIP)
		var bs []netip.AddrPort
		for j := 0; j < 10; j++ {
			bs = append(bs, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(i >> 4), byte(i<<4 | j)}), 8080))
		}
		v := model.Verdict{Service: model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i)}, Protocol: model.TCP},
			Action: model.Forward, Backends: model.SortBackends(bs)}
		d.Frontends[fe], o.Frontends[fe] = v, v
	}
	return d, o
}

// changeOne replaces one desired backend of one frontend (an endpoint change
// delivered by the watch, not yet programmed).
func changeOne(d model.Desired, i int) (model.Desired, map[model.Frontend]bool) {
	out := model.Desired{Frontends: make(map[model.Frontend]model.Verdict, len(d.Frontends))}
	for k, v := range d.Frontends {
		out.Frontends[k] = v
	}
	for fe, v := range out.Frontends {
		if i--; i > 0 {
			continue
		}
		v.Backends = append(append([]netip.AddrPort(nil), v.Backends[1:]...), netip.MustParseAddrPort("10.250.0.1:8080"))
		out.Frontends[fe] = v
		return out, map[model.Frontend]bool{fe: true}
	}
	return out, nil
}

// BenchmarkComparePerChange: the cost of comparing after one endpoint change
// (the desired state of one service changed, the datapath not yet), with the
// full Compare and with the incremental Comparer, at 10k and 100k frontends.
func BenchmarkComparePerChange(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		d, o := benchState(n)
		next, changed := changeOne(d, 7)
		b.Run(fmt.Sprintf("full/%dk", n/1000), func(b *testing.B) {
			for b.Loop() {
				Compare(next, o)
			}
		})
		b.Run(fmt.Sprintf("incremental/%dk", n/1000), func(b *testing.B) {
			c := NewComparer()
			c.Update(d, o, Changes{Full: true})
			for b.Loop() {
				c.Update(next, o, Changes{Desired: changed})
				c.Update(d, o, Changes{Desired: changed}) // and back: every iteration is one change
			}
		})
	}
}
