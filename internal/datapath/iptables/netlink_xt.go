package iptables

// Decoders of the xt compat info blobs iptables-nft stores in "match" and
// "target" expressions, each rendered as the extension's save function
// prints it. Layouts (kernel UAPI, host byte order unless __be):
//
//	xt_comment_info        char comment[256]
//	xt_tcp                 u16 spts[2], dpts[2]; u8 option, flg_mask, flg_cmp, invflags
//	xt_udp                 u16 spts[2], dpts[2]; u8 invflags
//	xt_statistic_info      u16 mode, flags; u32 u[3] (random.probability | nth.every, packet, count); ptr (aligned 8)
//	xt_recent_mtinfo(_v1)  u32 seconds, hit_count; u8 check_set, invert; char name[200]; u8 side; (v1: nf_inet_addr mask at 212)
//	xt_mark_mtinfo1        u32 mark, mask; u8 invert
//	xt_addrtype_info_v1    u16 source, dest; u32 flags
//	xt_conntrack_mtinfo2/3 4x(addr, mask) nf_inet_addr; u32 expires_min, max; u16 l4proto, 4 ports, match_flags (146), invert_flags (148), state_mask (150), ...
//	xt_nfacct_match_info   char name[32]; ptr
//	xt_sctp_info           u16 dpts[2], spts[2]; u32 chunkmap[64]; u32 chunk_match_type; flag_info[4] (3 bytes each); int flag_count; u32 flags (284), invflags (288)
//	nf_nat_ipv4_multi_range_compat  u32 rangesize; { u32 flags; __be32 min_ip, max_ip; __be16 min, max }
//	nf_nat_range(2)        u32 flags; nf_inet_addr min_addr, max_addr; __be16 min_proto, max_proto (, base_proto)
//	xt_mark_tginfo2        u32 mark, mask
//	ipt_reject_info / ip6t_reject_info  u32 with

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

var ne = binary.NativeEndian

func need(info []byte, n int, what string) error {
	if len(info) < n {
		return fmt.Errorf("%s info of %d bytes, want %d", what, len(info), n)
	}
	return nil
}

// renderMatch prints " -m NAME options" for an xt match.
func renderMatch(v6 bool, name string, rev uint32, info []byte) (string, error) {
	s, err := matchOpts(v6, name, rev, info)
	if err != nil {
		return "", err
	}
	return " -m " + name + s, nil
}

func matchOpts(v6 bool, name string, rev uint32, info []byte) (string, error) {
	switch {
	case name == "comment" && rev == 0:
		if err := need(info, 256, name); err != nil {
			return "", err
		}
		c, ok := cString(info[:256])
		if !ok {
			c = string(info[:255]) // comment_save forces the last byte to NUL
		}
		return " --comment" + saveString(c), nil
	case name == "tcp" && rev == 0:
		if err := need(info, 12, name); err != nil {
			return "", err
		}
		p := portMatch{spts: [2]uint16{ne.Uint16(info), ne.Uint16(info[2:])}, dpts: [2]uint16{ne.Uint16(info[4:]), ne.Uint16(info[6:])}}
		// xt_tcp: spts at 0, dpts at 4, option 8, flg_mask 9, flg_cmp 10, invflags 11.
		if info[8] != 0 || info[9] != 0 || info[11]&^0x03 != 0 {
			return "", fmt.Errorf("tcp match with --tcp-flags or --tcp-option")
		}
		p.sinv, p.dinv = info[11]&0x01 != 0, info[11]&0x02 != 0
		return portOpt("--sport", p.spts, p.sinv) + portOpt("--dport", p.dpts, p.dinv), nil
	case name == "udp" && rev == 0:
		if err := need(info, 9, name); err != nil {
			return "", err
		}
		if info[8]&^0x03 != 0 {
			return "", fmt.Errorf("udp match invflags %#x", info[8])
		}
		spts := [2]uint16{ne.Uint16(info), ne.Uint16(info[2:])}
		dpts := [2]uint16{ne.Uint16(info[4:]), ne.Uint16(info[6:])}
		return portOpt("--sport", spts, info[8]&0x01 != 0) + portOpt("--dport", dpts, info[8]&0x02 != 0), nil
	case name == "sctp" && rev == 0:
		return sctpOpts(info)
	case name == "statistic" && rev == 0:
		return statisticOpts(info)
	case name == "recent" && (rev == 0 || rev == 1):
		return recentOpts(v6, rev, info)
	case name == "mark" && rev == 1:
		if err := need(info, 9, name); err != nil {
			return "", err
		}
		s := ""
		if info[8] != 0 {
			s = " !"
		}
		return s + " --mark" + valMask(ne.Uint32(info), ne.Uint32(info[4:])), nil
	case name == "addrtype" && rev == 1:
		return addrtypeOpts(info)
	case name == "conntrack" && (rev == 2 || rev == 3):
		return conntrackOpts(info)
	case name == "nfacct" && (rev == 0 || rev == 1): // v1 only realigns the kernel pointer
		if err := need(info, 32, name); err != nil {
			return "", err
		}
		n, ok := cString(info[:32])
		if !ok {
			return "", fmt.Errorf("nfacct name not terminated")
		}
		return " --nfacct-name " + saveString(n), nil // sic: nfacct_print_name prints two spaces
	}
	return "", fmt.Errorf("xt match %q revision %d not decoded", name, rev)
}

// sctpOpts renders the ports of an sctp match (chunk types are not decoded).
func sctpOpts(info []byte) (string, error) {
	if err := need(info, 292, "sctp"); err != nil {
		return "", err
	}
	flags, inv := ne.Uint32(info[284:]), ne.Uint32(info[288:])
	if flags&^0x03 != 0 || inv&^0x03 != 0 {
		return "", fmt.Errorf("sctp match flags %#x (chunk types are not decoded)", flags)
	}
	var s string
	for _, p := range []struct {
		bit uint32
		opt string
		off int
	}{{1, "--sport", 4}, {2, "--dport", 0}} {
		if flags&p.bit == 0 {
			continue
		}
		if inv&p.bit != 0 {
			s += " !"
		}
		lo, hi := ne.Uint16(info[p.off:]), ne.Uint16(info[p.off+2:])
		if lo != hi {
			s += fmt.Sprintf(" %s %d:%d", p.opt, lo, hi)
		} else {
			s += fmt.Sprintf(" %s %d", p.opt, lo)
		}
	}
	return s, nil
}

func statisticOpts(info []byte) (string, error) {
	if err := need(info, 16, "statistic"); err != nil {
		return "", err
	}
	mode, flags := ne.Uint16(info), ne.Uint16(info[2:])
	if flags&^1 != 0 {
		return "", fmt.Errorf("statistic flags %#x", flags)
	}
	inv := ""
	if flags&1 != 0 {
		inv = " !"
	}
	switch mode {
	case 0: // XT_STATISTIC_MODE_RANDOM
		p := float64(ne.Uint32(info[4:])) / 0x80000000
		return " --mode random" + inv + " --probability " + strconv.FormatFloat(p, 'f', 11, 64), nil
	case 1: // XT_STATISTIC_MODE_NTH
		return fmt.Sprintf(" --mode nth%s --every %d --packet %d", inv, ne.Uint32(info[4:])+1, ne.Uint32(info[8:])), nil
	}
	return "", fmt.Errorf("statistic mode %d", mode)
}

func recentOpts(v6 bool, rev uint32, info []byte) (string, error) {
	size := 211
	if rev == 1 {
		size = 228
	}
	if err := need(info, size, "recent"); err != nil {
		return "", err
	}
	seconds, hits, set, inv := ne.Uint32(info), ne.Uint32(info[4:]), info[8], info[9]
	name, ok := cString(info[10:210])
	if !ok || set&^0x3f != 0 {
		return "", fmt.Errorf("recent match name or flags")
	}
	var s strings.Builder
	if inv != 0 {
		s.WriteString(" !")
	}
	for _, f := range []struct {
		bit byte
		opt string
	}{{1 << 1, " --set"}, {1 << 0, " --rcheck"}, {1 << 2, " --update"}, {1 << 3, " --remove"}} {
		if set&f.bit != 0 {
			s.WriteString(f.opt)
		}
	}
	if seconds != 0 {
		fmt.Fprintf(&s, " --seconds %d", seconds)
	}
	if set&(1<<5) != 0 {
		s.WriteString(" --reap")
	}
	if hits != 0 {
		fmt.Fprintf(&s, " --hitcount %d", hits)
	}
	if set&(1<<4) != 0 {
		s.WriteString(" --rttl")
	}
	s.WriteString(" --name " + name)
	if rev == 1 {
		m := info[212:228]
		if v6 {
			s.WriteString(" --mask " + netip.AddrFrom16([16]byte(m)).String())
		} else {
			s.WriteString(" --mask " + netip.AddrFrom4([4]byte(m[:4])).String())
		}
	}
	switch info[210] {
	case 0:
		s.WriteString(" --rsource")
	case 1:
		s.WriteString(" --rdest")
	}
	return s.String(), nil
}

// rtnNames are the address types addrtype prints, by bit.
var rtnNames = []string{"UNSPEC", "UNICAST", "LOCAL", "BROADCAST", "ANYCAST", "MULTICAST",
	"BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE"}

func addrTypes(mask uint16) string {
	var out []string
	for i, n := range rtnNames {
		if mask&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

func addrtypeOpts(info []byte) (string, error) {
	if err := need(info, 8, "addrtype"); err != nil {
		return "", err
	}
	src, dst, flags := ne.Uint16(info), ne.Uint16(info[2:]), ne.Uint32(info[4:])
	if flags&^0x0f != 0 || src>>len(rtnNames) != 0 || dst>>len(rtnNames) != 0 {
		return "", fmt.Errorf("addrtype flags %#x or types %#x/%#x", flags, src, dst)
	}
	var s string
	if src != 0 {
		if flags&1 != 0 {
			s += " !"
		}
		s += " --src-type " + addrTypes(src)
	}
	if dst != 0 {
		if flags&2 != 0 {
			s += " !"
		}
		s += " --dst-type " + addrTypes(dst)
	}
	if flags&4 != 0 {
		s += " --limit-iface-in"
	}
	if flags&8 != 0 {
		s += " --limit-iface-out"
	}
	return s, nil
}

// conntrackOpts renders the state-only conntrack match kube-proxy writes
// (--ctstate); any other conntrack criterion is not decoded.
func conntrackOpts(info []byte) (string, error) {
	if err := need(info, 152, "conntrack"); err != nil {
		return "", err
	}
	const (
		flagState      = 1 << 0
		flagStateAlias = 1 << 13
	)
	match, inv, state := ne.Uint16(info[146:]), ne.Uint16(info[148:]), ne.Uint16(info[150:])
	if match&^(flagState|flagStateAlias) != 0 || match&flagState == 0 || inv&^flagState != 0 {
		return "", fmt.Errorf("conntrack match flags %#x (only --ctstate is decoded)", match)
	}
	names := []struct {
		bit uint16
		n   string
	}{{1 << 0, "INVALID"}, {1 << 3, "NEW"}, {1 << 2, "RELATED"}, {1 << 1, "ESTABLISHED"},
		{1 << 8, "UNTRACKED"}, {1 << 6, "SNAT"}, {1 << 7, "DNAT"}}
	var states []string
	rest := state
	for _, n := range names {
		if state&n.bit != 0 {
			states = append(states, n.n)
			rest &^= n.bit
		}
	}
	if rest != 0 {
		return "", fmt.Errorf("conntrack state bits %#x", rest)
	}
	s := ""
	if inv&flagState != 0 {
		s = " !"
	}
	opt := " --ctstate "
	if match&flagStateAlias != 0 {
		opt = " --state "
	}
	return s + opt + strings.Join(states, ","), nil
}

// renderTarget prints " -j NAME options" for an xt target.
func renderTarget(v6 bool, name string, rev uint32, info []byte) (string, error) {
	var s string
	var err error
	switch {
	case name == "DNAT":
		s, err = natOpts(v6, rev, info, "--to-destination ", false)
	case name == "MASQUERADE" && rev == 0:
		s, err = natOpts(v6, rev, info, "--to-ports ", true)
	case name == "MARK" && rev == 2:
		if err = need(info, 8, name); err == nil {
			s = fmt.Sprintf(" --set-xmark 0x%x/0x%x", ne.Uint32(info), ne.Uint32(info[4:]))
		}
	case name == "REJECT" && rev == 0:
		if err = need(info, 4, name); err == nil {
			s, err = rejectWith(v6, ne.Uint32(info))
		}
	default:
		err = fmt.Errorf("xt target %q revision %d not decoded", name, rev)
	}
	if err != nil {
		return "", err
	}
	return " -j " + name + s, nil
}

var (
	rejectV4 = []string{"icmp-net-unreachable", "icmp-host-unreachable", "icmp-proto-unreachable",
		"icmp-port-unreachable", "", "icmp-net-prohibited", "icmp-host-prohibited", "tcp-reset", "icmp-admin-prohibited"}
	rejectV6 = []string{"icmp6-no-route", "icmp6-adm-prohibited", "icmp6-not-neighbor", "icmp6-addr-unreachable",
		"icmp6-port-unreachable", "", "tcp-reset", "icmp6-policy-fail", "icmp6-reject-route"}
)

func rejectWith(v6 bool, with uint32) (string, error) {
	t := rejectV4
	if v6 {
		t = rejectV6
	}
	if int(with) >= len(t) || t[with] == "" {
		return "", fmt.Errorf("REJECT with %d", with)
	}
	return " --reject-with " + t[with], nil
}

// NAT range flags (nf_nat.h).
const (
	natMapIPs       = 1 << 0
	natProtoSpec    = 1 << 1
	natRandom       = 1 << 2
	natPersistent   = 1 << 3
	natRandomFully  = 1 << 4
	natProtoOffset  = 1 << 5
	natKnownFlags   = natMapIPs | natProtoSpec | natRandom | natPersistent | natRandomFully | natProtoOffset
	natRange2Size   = 44 // nf_nat_range2 with padding
	natRangeSize    = 40
	natCompatV4Size = 20
)

// natOpts reads the range of a DNAT / MASQUERADE target (the revision
// picks the struct) and prints it as __NAT_print does.
func natOpts(v6 bool, rev uint32, info []byte, opt string, skipColon bool) (string, error) {
	var flags uint32
	var minA, maxA netip.Addr
	var minP, maxP, baseP uint16
	switch {
	case rev == 0 && !v6: // nf_nat_ipv4_multi_range_compat
		if err := need(info, natCompatV4Size, "nat"); err != nil {
			return "", err
		}
		if ne.Uint32(info) != 1 {
			return "", fmt.Errorf("nat rangesize %d", ne.Uint32(info))
		}
		flags = ne.Uint32(info[4:])
		minA, maxA = netip.AddrFrom4([4]byte(info[8:12])), netip.AddrFrom4([4]byte(info[12:16]))
		minP, maxP = binary.BigEndian.Uint16(info[16:]), binary.BigEndian.Uint16(info[18:])
	case rev == 1 || rev == 2 || rev == 0 && v6:
		size := natRangeSize
		if rev == 2 {
			size = natRange2Size - 2 // the padding is not always sent
		}
		if err := need(info, size, "nat"); err != nil {
			return "", err
		}
		flags = ne.Uint32(info)
		if v6 {
			minA, maxA = netip.AddrFrom16([16]byte(info[4:20])), netip.AddrFrom16([16]byte(info[20:36]))
		} else {
			minA, maxA = netip.AddrFrom4([4]byte(info[4:8])), netip.AddrFrom4([4]byte(info[20:24]))
		}
		minP, maxP = binary.BigEndian.Uint16(info[36:]), binary.BigEndian.Uint16(info[38:])
		if rev == 2 {
			baseP = binary.BigEndian.Uint16(info[40:])
		}
	default:
		return "", fmt.Errorf("nat target revision %d", rev)
	}
	if flags&^natKnownFlags != 0 {
		return "", fmt.Errorf("nat flags %#x", flags)
	}
	brackets := v6 && flags&natProtoSpec != 0
	var r strings.Builder
	if flags&natMapIPs != 0 {
		if brackets {
			r.WriteByte('[')
		}
		r.WriteString(minA.String())
		if minA != maxA {
			r.WriteString("-" + maxA.String())
		}
		if brackets {
			r.WriteByte(']')
		}
	}
	if flags&natProtoSpec != 0 {
		fmt.Fprintf(&r, ":%d", minP)
		if maxP != minP {
			fmt.Fprintf(&r, "-%d", maxP)
		}
		if flags&natProtoOffset != 0 {
			fmt.Fprintf(&r, "/%d", baseP)
		}
	}
	var s string
	if rs := r.String(); rs != "" {
		if skipColon && rs[0] == ':' {
			rs = rs[1:]
		}
		s = " " + opt + rs
	}
	if flags&natRandom != 0 {
		s += " --random"
	}
	if flags&natRandomFully != 0 {
		s += " --random-fully"
	}
	if flags&natPersistent != 0 {
		s += " --persistent"
	}
	return s, nil
}
