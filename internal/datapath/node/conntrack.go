package node

import (
	"net/netip"

	"github.com/ti-mo/conntrack"

	"github.com/netdrift/netdrift/internal/model"
)

// tcpStateNames are the kernel's TCP conntrack states (enum tcp_conntrack).
var tcpStateNames = []string{"NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "CLOSE_WAIT",
	"LAST_ACK", "TIME_WAIT", "CLOSE", "SYN_SENT2"}

func flowProtocol(p uint8) (model.Protocol, bool) {
	switch p {
	case 6:
		return model.TCP, true
	case 17:
		return model.UDP, true
	case 132:
		return model.SCTP, true
	}
	return "", false
}

func tupleFromConntrack(t conntrack.Tuple) model.Tuple {
	return model.Tuple{
		Src: netip.AddrPortFrom(t.IP.SourceAddress.Unmap(), t.Proto.SourcePort),
		Dst: netip.AddrPortFrom(t.IP.DestinationAddress.Unmap(), t.Proto.DestinationPort),
	}
}

// flowFromConntrack converts one conntrack entry; ok is false for protocols
// Services do not use (ICMP, GRE, ...). Pure.
func flowFromConntrack(f conntrack.Flow) (model.Flow, bool) {
	p, ok := flowProtocol(f.TupleOrig.Proto.Protocol)
	if !ok || !f.TupleOrig.IP.SourceAddress.IsValid() || !f.TupleReply.IP.SourceAddress.IsValid() {
		return model.Flow{}, false
	}
	out := model.Flow{
		Protocol: p,
		Orig:     tupleFromConntrack(f.TupleOrig),
		Reply:    tupleFromConntrack(f.TupleReply),
		Assured:  f.Status.Assured(),
		Dying:    f.Status&conntrack.StatusDying != 0,
		Timeout:  f.Timeout,
	}
	if p == model.TCP && f.ProtoInfo.TCP != nil {
		if s := int(f.ProtoInfo.TCP.State); s < len(tcpStateNames) {
			out.TCPState = tcpStateNames[s]
		}
	}
	return out, true
}

// flowsFromConntrack converts a dump, dropping other protocols.
func flowsFromConntrack(fs []conntrack.Flow) []model.Flow {
	out := make([]model.Flow, 0, len(fs))
	for _, f := range fs {
		if g, ok := flowFromConntrack(f); ok {
			out = append(out, g)
		}
	}
	return out
}
