package ipvs

import (
	"strconv"

	"github.com/netdrift/netdrift/internal/model"
)

// ID renders the virtual server the way ipvsadm names it in rules:
// "-t 10.0.0.1:80", "-u [fd00::1]:53", "--sctp-service 10.0.0.1:9",
// "-f 100".
func (vs VirtualServer) ID() string {
	if vs.FWMark != 0 {
		s := "-f " + strconv.FormatUint(uint64(vs.FWMark), 10)
		if vs.Family == model.IPv6 {
			s += " -6"
		}
		return s
	}
	flag := "-t"
	switch vs.Protocol {
	case model.UDP:
		flag = "-u"
	case model.SCTP:
		flag = "--sctp-service"
	}
	return flag + " " + vs.Addr.String()
}

// Rule renders the virtual server as `ipvsadm -Sn` prints it.
func (vs VirtualServer) Rule() string {
	s := "-A " + vs.ID() + " -s " + vs.Scheduler
	if vs.Persistent {
		s += " -p " + strconv.FormatUint(uint64(vs.Timeout), 10)
	}
	return s
}

// RealRule renders one of the virtual server's real servers as
// `ipvsadm -Sn` prints it.
func (vs VirtualServer) RealRule(r RealServer) string {
	return "-a " + vs.ID() + " -r " + r.Addr.String() + " " + forwardFlag(r.Forward) +
		" -w " + strconv.Itoa(r.Weight)
}

func forwardFlag(f string) string {
	switch f {
	case ForwardRoute, ForwardLocal:
		return "-g"
	case ForwardTunnel:
		return "-i"
	}
	return "-m"
}

// FormatSave renders a table in `ipvsadm -Sn` form (virtual servers and real
// servers in a stable order); ParseSave reads it back.
func FormatSave(t Table) []byte {
	var b []byte
	for _, vs := range sortedServers(t.Services) {
		b = append(b, vs.Rule()...)
		b = append(b, '\n')
		for _, r := range sortedReals(vs.Reals) {
			b = append(b, vs.RealRule(r)...)
			b = append(b, '\n')
		}
	}
	return b
}
