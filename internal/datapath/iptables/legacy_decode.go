package iptables

// The pure half of the in-process iptables-legacy reader: the blob
// IPT_SO_GET_ENTRIES (IP6T_SO_GET_ENTRIES) returns -> chains of rules, each
// rule rendered as the arguments iptables-legacy-save prints after
// "-A CHAIN" ("-d 10.96.0.10/32 -p tcp -m comment --comment x -m tcp
// --dport 53 -j KUBE-SVC-..."). The text then goes through the same
// tokenizer and rule parser as a dump (addNLRule: dump.go, rule.go), as the
// iptables-nft netlink reader's does, so both paths share one meaning of
// every option and the evidence strings are identical.
//
// Layouts: kernel UAPI, host byte order (linux/netfilter_ipv4/ip_tables.h,
// linux/netfilter_ipv6/ip6_tables.h, linux/netfilter/x_tables.h):
//
//	ipt_getinfo   char name[32]; u32 valid_hooks, hook_entry[5], underflow[5], num_entries, size
//	ipt_entry     ipt_ip (84 bytes); u32 nfcache; u16 target_offset (88), next_offset (90);
//	              u32 comefrom; xt_counters (96, 16 bytes); matches at 112; target at target_offset
//	ipt_ip        be32 src, dst, smsk, dmsk; char iniface[16], outiface[16]; u8 iniface_mask[16],
//	              outiface_mask[16]; u16 proto (80); u8 flags (82), invflags (83)
//	ip6t_entry    ip6t_ip6 (136 bytes); u32 nfcache; u16 target_offset (140), next_offset (142);
//	              u32 comefrom; xt_counters (152); matches at 168
//	ip6t_ip6      in6 src, dst, smsk, dmsk; ifaces and masks as ipt_ip (64..128); u16 proto (128);
//	              u8 tos (130), flags (131), invflags (132)
//	xt_entry_match / xt_entry_target  u16 size; char name[29]; u8 revision; data at 32
//	xt_standard_target  target header; int verdict (<0: -NF_ACCEPT-1 etc.; >=0: blob offset)
//	xt_error_target     target header "ERROR"; char errorname[30] (a user chain's name)
//
// Chains are cut as libiptc's parse_table does (what iptables-save prints
// is libiptc's view): an ERROR entry starts a user chain, a hook entry a
// built-in chain, the last entry of each chain is its policy (built-in) or
// its RETURN foot (user chain) and is not a rule; the table ends with an
// ERROR entry. A jump's verdict is the offset of the entry after the
// target chain's ERROR head (libiptc compiles jumps so). Anything else —
// a foot that is not an unconditional policy / RETURN, a jump into the
// middle of a chain, offsets outside the blob — is an error: the caller
// falls back to iptables-legacy-save rather than guess.
//
// The xt match and target data blobs are the ones iptables-nft stores in
// its compat expressions; netlink_xt.go decodes and renders them for both.

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// tableInfo is struct ipt_getinfo without the name.
type tableInfo struct {
	validHooks uint32
	hookEntry  [5]uint32
	underflow  [5]uint32
	numEntries uint32
	size       uint32
}

func parseInfo(b []byte) (tableInfo, error) {
	if len(b) < getinfoSize {
		return tableInfo{}, fmt.Errorf("getinfo of %d bytes", len(b))
	}
	var ti tableInfo
	ti.validHooks = ne.Uint32(b[32:])
	for i := range 5 {
		ti.hookEntry[i] = ne.Uint32(b[36+4*i:])
		ti.underflow[i] = ne.Uint32(b[56+4*i:])
	}
	ti.numEntries, ti.size = ne.Uint32(b[76:]), ne.Uint32(b[80:])
	return ti, nil
}

// entryLayout is where the fixed fields of ipt_entry / ip6t_entry are.
type entryLayout struct {
	size, ip, targetOff, nextOff, counters int // ip: size of ipt_ip / ip6t_ip6
}

var (
	layoutV4 = entryLayout{size: 112, ip: 84, targetOff: 88, nextOff: 90, counters: 96}
	layoutV6 = entryLayout{size: 168, ip: 136, targetOff: 140, nextOff: 142, counters: 152}
)

func layoutOf(v6 bool) entryLayout {
	if v6 {
		return layoutV6
	}
	return layoutV4
}

const (
	xtHeaderSize      = 32 // xt_entry_match / xt_entry_target header
	xtStdTargetSize   = 40 // XT_ALIGN(sizeof(struct xt_standard_target))
	verdictDrop       = -1 // -NF_DROP - 1
	verdictAccept     = -2 // -NF_ACCEPT - 1
	verdictQueue      = -4 // -NF_QUEUE - 1
	verdictReturn     = -5 // XT_RETURN = -NF_REPEAT - 1
	iptFlagFrag       = 0x01
	iptFlagGoto       = 0x02
	ip6tFlagProto     = 0x01
	ip6tFlagTOS       = 0x02
	ip6tFlagGoto      = 0x04
	iptInvViaIn       = 0x01
	iptInvViaOut      = 0x02
	iptInvSrcIP       = 0x08
	iptInvDstIP       = 0x10
	iptInvFrag        = 0x20
	iptInvProto       = 0x40
	iptInvKnownV4     = iptInvViaIn | iptInvViaOut | iptInvSrcIP | iptInvDstIP | iptInvFrag | iptInvProto
	iptInvKnownV6     = iptInvViaIn | iptInvViaOut | iptInvSrcIP | iptInvDstIP | iptInvProto
	legacyMaxChainLen = 30 // xt_error_target errorname
)

var hookNames = [5]string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}

// legacyChain is one chain of a decoded table, in iptables-save order.
type legacyChain struct {
	name    string
	builtin bool
	policy  string // built-in chains: ACCEPT or DROP
	rules   []legacyRule
}

// legacyRule is one rendered rule, or why it could not be rendered.
type legacyRule struct {
	args string
	err  error
}

// xtName reads the name of a match or target header.
func xtName(h []byte) string {
	n, ok := cString(h[2:31])
	if !ok {
		return string(h[2:31])
	}
	return n
}

// zeroCounters clears each entry's packet and byte counters, which move
// with traffic, so two reads of the same rules are the same bytes. It
// stops at the first malformed entry (the decode reports it).
func zeroCounters(v6 bool, blob []byte) {
	lay := layoutOf(v6)
	for off := 0; off+lay.size <= len(blob); {
		next := int(ne.Uint16(blob[off+lay.nextOff:]))
		if next < lay.size {
			return
		}
		clear(blob[off+lay.counters : off+lay.counters+16])
		off += next
	}
}

// decodeLegacyTable cuts a table's blob into chains and renders every rule.
// An error is structural (the blob is not what libiptc writes); a rule the
// renderer does not know is returned in its legacyRule.
func decodeLegacyTable(v6 bool, info tableInfo, blob []byte) ([]legacyChain, error) {
	lay := layoutOf(v6)
	if uint32(len(blob)) != info.size {
		return nil, fmt.Errorf("blob of %d bytes, header says %d", len(blob), info.size)
	}
	// Pass 1: entry offsets and chain heads.
	type entry struct{ off, next int }
	entries := make([]entry, 0, min(int(info.numEntries), len(blob)/lay.size))
	hooks := map[int]int{} // offset -> hook
	for h := range 5 {
		if info.validHooks&(1<<h) != 0 {
			hooks[int(info.hookEntry[h])] = h
		}
	}
	for off := 0; off < len(blob); {
		if off+lay.size > len(blob) {
			return nil, fmt.Errorf("entry at %d: truncated", off)
		}
		t, next := int(ne.Uint16(blob[off+lay.targetOff:])), int(ne.Uint16(blob[off+lay.nextOff:]))
		if t < lay.size || t+xtHeaderSize > next || off+next > len(blob) || next%8 != 0 {
			return nil, fmt.Errorf("entry at %d: target offset %d, next offset %d", off, t, next)
		}
		if ts := int(ne.Uint16(blob[off+t:])); ts < xtHeaderSize || t+ts > next {
			return nil, fmt.Errorf("entry at %d: target size %d", off, ts)
		}
		entries = append(entries, entry{off, next})
		off += next
	}
	if len(entries) != int(info.numEntries) {
		return nil, fmt.Errorf("%d entries, header says %d", len(entries), info.numEntries)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("empty table")
	}
	// Pass 2: chains (libiptc's cache_add_entry). Each chain's entries are
	// [first, end); its last entry is the policy or foot.
	type span struct {
		c          *legacyChain
		hook       int // -1: user chain
		head       int // offset of the ERROR head (user chains)
		first, end int // entry indexes
	}
	var spans []span
	starts := map[int]string{} // jump target offset -> user chain
	cur := -1
	closeCur := func(at int) {
		if cur >= 0 {
			spans[cur].end = at
		}
	}
	for i, e := range entries {
		tgt := blob[e.off+int(ne.Uint16(blob[e.off+lay.targetOff:])) : e.off+e.next]
		name := xtName(tgt)
		if i == len(entries)-1 {
			if name != "ERROR" {
				return nil, fmt.Errorf("table does not end with an ERROR entry")
			}
			closeCur(i)
			break
		}
		if name == "ERROR" {
			chain, ok := cString(tgt[xtHeaderSize:min(len(tgt), xtHeaderSize+legacyMaxChainLen)])
			if !ok || chain == "" || strings.ContainsAny(chain, " \t\"\\") {
				return nil, fmt.Errorf("entry at %d: user chain name %q", e.off, chain)
			}
			closeCur(i)
			spans = append(spans, span{c: &legacyChain{name: chain}, hook: -1, head: e.off, first: i + 1})
			cur = len(spans) - 1
			starts[e.off+e.next] = chain
			continue
		}
		if h, ok := hooks[e.off]; ok {
			closeCur(i)
			spans = append(spans, span{c: &legacyChain{name: hookNames[h], builtin: true}, hook: h, first: i})
			cur = len(spans) - 1
			delete(hooks, e.off)
			continue
		}
		if cur < 0 {
			return nil, fmt.Errorf("entry at %d before any chain", e.off)
		}
	}
	if len(hooks) != 0 {
		return nil, fmt.Errorf("hook entry points not at an entry")
	}
	// Pass 3: policies and feet, then the rules.
	for _, s := range spans {
		if s.end <= s.first {
			return nil, fmt.Errorf("chain %s has no policy or foot entry", s.c.name)
		}
		foot := entries[s.end-1]
		v, ok := stdVerdict(v6, blob[foot.off:foot.off+foot.next])
		switch {
		case !ok:
			return nil, fmt.Errorf("chain %s ends in a rule that is not an unconditional verdict", s.c.name)
		case s.hook >= 0 && (v != verdictAccept && v != verdictDrop || foot.off != int(info.underflow[s.hook])):
			return nil, fmt.Errorf("built-in chain %s: policy %d at %d, underflow at %d", s.c.name, v, foot.off, info.underflow[s.hook])
		case s.hook < 0 && v != verdictReturn:
			return nil, fmt.Errorf("user chain %s ends in verdict %d, not RETURN", s.c.name, v)
		}
		if s.hook >= 0 {
			s.c.policy = "ACCEPT"
			if v == verdictDrop {
				s.c.policy = "DROP"
			}
		}
		s.c.rules = make([]legacyRule, 0, s.end-1-s.first)
		for i, e := range entries[s.first : s.end-1] {
			args, err := renderLegacyEntry(v6, blob[e.off:e.off+e.next], e.off, starts)
			if err != nil {
				err = fmt.Errorf("chain %s rule %d (entry at offset %d): %v", s.c.name, i+1, e.off, err)
			}
			s.c.rules = append(s.c.rules, legacyRule{args: args, err: err})
		}
	}
	// iptables-save order: built-in chains as the blob holds them, then the
	// user chains sorted by name (libiptc keeps them sorted).
	out := make([]legacyChain, 0, len(spans))
	for _, s := range spans {
		if s.hook >= 0 {
			out = append(out, *s.c)
		}
	}
	n := len(out)
	for _, s := range spans {
		if s.hook < 0 {
			out = append(out, *s.c)
		}
	}
	slices.SortStableFunc(out[n:], func(a, b legacyChain) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// stdVerdict returns the verdict of an unconditional standard-target
// entry without matches (a policy or a chain foot).
func stdVerdict(v6 bool, e []byte) (int32, bool) {
	lay := layoutOf(v6)
	if int(ne.Uint16(e[lay.targetOff:])) != lay.size || !allZero(e[:lay.ip]) {
		return 0, false
	}
	t := e[lay.size:]
	if len(t) < xtStdTargetSize || ne.Uint16(t) != xtStdTargetSize || xtName(t) != "" {
		return 0, false
	}
	return int32(ne.Uint32(t[xtHeaderSize:])), true
}

// renderLegacyEntry prints one rule entry as iptables-legacy-save does
// (print_rule4 / print_rule6 of iptables 1.8): addresses, interfaces,
// protocol, fragment, the matches in order, the target.
func renderLegacyEntry(v6 bool, e []byte, off int, starts map[int]string) (string, error) {
	lay := layoutOf(v6)
	var s strings.Builder
	var flags, inv byte
	var proto uint16
	if v6 {
		proto, flags, inv = ne.Uint16(e[128:]), e[131], e[132]
		if flags&^(ip6tFlagProto|ip6tFlagGoto) != 0 || inv&^iptInvKnownV6 != 0 {
			return "", fmt.Errorf("ip6t_ip6 flags %#x, invflags %#x", flags, inv)
		}
		if e[130] != 0 {
			return "", fmt.Errorf("ip6t_ip6 tos %#x", e[130])
		}
		saveAddr(&s, true, 's', e[0:16], e[32:48], inv&iptInvSrcIP != 0)
		saveAddr(&s, true, 'd', e[16:32], e[48:64], inv&iptInvDstIP != 0)
		saveIface(&s, 'i', e[64:80], e[96:112], inv&iptInvViaIn != 0)
		saveIface(&s, 'o', e[80:96], e[112:128], inv&iptInvViaOut != 0)
	} else {
		proto, flags, inv = ne.Uint16(e[80:]), e[82], e[83]
		if flags&^(iptFlagFrag|iptFlagGoto) != 0 || inv&^iptInvKnownV4 != 0 {
			return "", fmt.Errorf("ipt_ip flags %#x, invflags %#x", flags, inv)
		}
		saveAddr(&s, false, 's', e[0:4], e[8:12], inv&iptInvSrcIP != 0)
		saveAddr(&s, false, 'd', e[4:8], e[12:16], inv&iptInvDstIP != 0)
		saveIface(&s, 'i', e[16:32], e[48:64], inv&iptInvViaIn != 0)
		saveIface(&s, 'o', e[32:48], e[64:80], inv&iptInvViaOut != 0)
	}
	if proto != 0 {
		if inv&iptInvProto != 0 {
			s.WriteString(" !")
		}
		s.WriteString(" -p " + legacyProtoName(proto))
	}
	if !v6 && flags&iptFlagFrag != 0 {
		if inv&iptInvFrag != 0 {
			s.WriteString(" !")
		}
		s.WriteString(" -f")
	}
	t := int(ne.Uint16(e[lay.targetOff:]))
	for m := lay.size; m < t; {
		if m+xtHeaderSize > t {
			return "", fmt.Errorf("match header at %d past the target", m)
		}
		size := int(ne.Uint16(e[m:]))
		if size < xtHeaderSize || m+size > t {
			return "", fmt.Errorf("match size %d at %d", size, m)
		}
		name, rev := xtName(e[m:]), uint32(e[m+31])
		r, err := renderMatch(v6, name, rev, e[m+xtHeaderSize:m+size])
		if err != nil {
			return "", err
		}
		if name == "conntrack" && (strings.HasPrefix(r, " -m conntrack --state ") || strings.HasPrefix(r, " -m conntrack ! --state ")) {
			r = " -m state" + strings.TrimPrefix(r, " -m conntrack") // the conntrack match's "state" alias
		}
		s.WriteString(r)
		m += size
	}
	tgt := e[t:]
	size := int(ne.Uint16(tgt))
	name, rev := xtName(tgt), uint32(tgt[31])
	if name != "" {
		r, err := renderTarget(v6, name, rev, tgt[xtHeaderSize:size])
		if err != nil {
			return "", err
		}
		s.WriteString(r)
		return strings.TrimPrefix(s.String(), " "), nil
	}
	if size != xtStdTargetSize {
		return "", fmt.Errorf("standard target of %d bytes", size)
	}
	v := int32(ne.Uint32(tgt[xtHeaderSize:]))
	var label string
	switch {
	case v == verdictAccept:
		label = "ACCEPT"
	case v == verdictDrop:
		label = "DROP"
	case v == verdictQueue:
		label = "QUEUE"
	case v == verdictReturn:
		label = "RETURN"
	case v < 0:
		return "", fmt.Errorf("standard verdict %d", v)
	case int(v) == off+len(e):
		label = "" // fall through to the next rule: iptables-save prints no target
	default:
		chain, ok := starts[int(v)]
		if !ok {
			return "", fmt.Errorf("jump to offset %d, not the start of a user chain", v)
		}
		label = chain
	}
	if label != "" {
		gotoFlag := byte(iptFlagGoto)
		if v6 {
			gotoFlag = ip6tFlagGoto
		}
		if flags&gotoFlag != 0 {
			s.WriteString(" -g " + label)
		} else {
			s.WriteString(" -j " + label)
		}
	}
	return strings.TrimPrefix(s.String(), " "), nil
}

// saveAddr prints "-s addr/mask" as iptables 1.8's save_ipv4_addr /
// save_ipv6_addr do: nothing for an unset, uninverted address; the prefix
// length for a contiguous mask, else the mask.
func saveAddr(s *strings.Builder, v6 bool, letter byte, addr, mask []byte, inv bool) {
	if !inv && allZero(addr) && allZero(mask) {
		return
	}
	saveOption(s, letter, inv)
	s.WriteString(ntop(v6, addr))
	s.WriteByte('/')
	if ones, ok := prefixLen(mask); ok {
		s.WriteString(strconv.Itoa(ones))
	} else {
		s.WriteString(ntop(v6, mask))
	}
}

// saveOption prints " [!] -x " before an option's value, as iptables-save
// does for the addresses and interfaces.
func saveOption(s *strings.Builder, letter byte, inv bool) {
	if inv {
		s.WriteString(" !")
	}
	s.WriteString(" -")
	s.WriteByte(letter)
	s.WriteByte(' ')
}

// ntop formats an address as inet_ntop does (glibc prints an
// IPv4-compatible IPv6 address with a dotted quad).
func ntop(v6 bool, b []byte) string {
	if !v6 {
		return netip.AddrFrom4([4]byte(b)).String()
	}
	if allZero(b[:12]) && (b[12] != 0 || b[13] != 0) {
		return "::" + netip.AddrFrom4([4]byte(b[12:16])).String()
	}
	return netip.AddrFrom16([16]byte(b)).String()
}

// saveIface prints "-i name" as libxtables' save_iface does: the name up to
// the mask, "+" when the mask ends before the name's NUL.
func saveIface(s *strings.Builder, letter byte, name, mask []byte, inv bool) {
	if mask[0] == 0 {
		return
	}
	saveOption(s, letter, inv)
	for i := range name {
		if mask[i] != 0 {
			if name[i] != 0 {
				s.WriteByte(name[i])
			}
			continue
		}
		if name[i-1] != 0 {
			s.WriteByte('+')
		}
		break
	}
}

// legacyProtoName is the name iptables-legacy-save prints for a protocol:
// libxtables' proto_to_name looks in xtables_chain_protos, then asks
// getprotobynumber (/etc/protocols: the agent reads the file its own
// iptables-legacy-save would), else prints the number.
func legacyProtoName(p uint16) string {
	switch p {
	case 6:
		return "tcp"
	case 132:
		return "sctp"
	case 17:
		return "udp"
	case 136:
		return "udplite"
	case 1:
		return "icmp"
	case 58:
		return "ipv6-icmp"
	case 50:
		return "esp"
	case 51:
		return "ah"
	case 135:
		return "mobility-header"
	}
	if n, ok := etcProtocols()[p]; ok {
		return n
	}
	return strconv.Itoa(int(p))
}

var etcProtocols = sync.OnceValue(func() map[uint16]string {
	b, err := os.ReadFile("/etc/protocols")
	if err != nil {
		return nil
	}
	return parseProtocols(string(b))
})

// parseProtocols reads /etc/protocols: "name number aliases... # comment";
// getprotobynumber returns the first line with the number.
func parseProtocols(text string) map[uint16]string {
	m := map[uint16]string{}
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 16)
		if err != nil {
			continue
		}
		if _, seen := m[uint16(n)]; !seen {
			m[uint16(n)] = f[0]
		}
	}
	return m
}

// legacyTableText renders decoded chains as iptables-legacy-save prints the
// table (without the comment lines and counters): for tests and debugging.
func legacyTableText(table string, chains []legacyChain) string {
	var b bytes.Buffer
	b.WriteString("*" + table + "\n")
	for _, c := range chains {
		p := c.policy
		if !c.builtin {
			p = "-"
		}
		fmt.Fprintf(&b, ":%s %s [0:0]\n", c.name, p)
	}
	for _, c := range chains {
		for _, r := range c.rules {
			if r.err != nil {
				fmt.Fprintf(&b, "# undecodable: %v\n", r.err)
				continue
			}
			b.WriteString("-A " + c.name)
			if r.args != "" {
				b.WriteString(" " + r.args)
			}
			b.WriteByte('\n')
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}
