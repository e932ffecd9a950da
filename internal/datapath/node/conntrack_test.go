package node

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/ti-mo/conntrack"

	"github.com/netdrift/netdrift/internal/model"
)

func ctFlow(proto uint8, src, dst, replySrc string, status conntrack.Status, tcpState uint8) conntrack.Flow {
	s, d, r := netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst), netip.MustParseAddrPort(replySrc)
	f := conntrack.NewFlow(proto, status, s.Addr(), d.Addr(), s.Port(), d.Port(), 30, 0)
	f.TupleReply.IP.SourceAddress = r.Addr()
	f.TupleReply.Proto.SourcePort = r.Port()
	if proto == 6 {
		f.ProtoInfo.TCP = &conntrack.ProtoInfoTCP{State: tcpState}
	}
	return f
}

func TestFlowsFromConntrackGolden(t *testing.T) {
	icmp := ctFlow(1, "10.0.0.1:0", "10.0.0.2:0", "10.0.0.2:0", 0, 0)
	noAddr := conntrack.Flow{}
	noAddr.TupleOrig.Proto.Protocol = 17
	in := []conntrack.Flow{
		ctFlow(17, "10.244.0.5:40000", "10.96.0.10:53", "10.244.1.5:53", conntrack.StatusDstNAT|conntrack.StatusConfirmed, 0),
		ctFlow(6, "10.244.0.5:40001", "10.96.0.10:53", "10.244.1.5:53", conntrack.StatusAssured|conntrack.StatusDstNAT, 3),
		ctFlow(6, "10.244.0.5:40002", "10.96.0.10:53", "10.244.1.5:53", conntrack.StatusDying, 7),
		ctFlow(6, "10.244.0.5:40003", "10.96.0.10:53", "10.244.1.5:53", 0, 42), // state out of range
		ctFlow(132, "[fd00::5]:40004", "[fd00:96::10]:5000", "[fd00::9]:5000", 0, 0),
		icmp, noAddr,
	}
	got := flowsFromConntrack(in)
	var b strings.Builder
	for _, f := range got {
		fmt.Fprintf(&b, "%s state=%q assured=%v dying=%v dnat=%v timeout=%d\n", f, f.TCPState, f.Assured, f.Dying, f.DNATed(), f.Timeout)
	}
	checkNodeGolden(t, "conntrack.golden", b.String())
	if len(got) != 5 {
		t.Fatalf("want 5 flows (ICMP and address-less dropped), got %d", len(got))
	}
	if got[1].TCPState != "ESTABLISHED" || !got[1].Assured || got[2].TCPState != "TIME_WAIT" || !got[2].Dying {
		t.Errorf("tcp: %+v %+v", got[1], got[2])
	}
	if got[0].Protocol != model.UDP || got[0].TCPState != "" || got[4].Protocol != model.SCTP {
		t.Errorf("protocols: %+v %+v", got[0], got[4])
	}
}
