package iptables

// The pure half of the nf_tables reader: one NFT_MSG_NEWRULE message of a
// table iptables-nft wrote -> the rule's arguments as iptables-nft-save
// prints them ("-s 10.0.0.0/8 -p tcp -m comment --comment x -m tcp
// --dport 80 -j KUBE-SVC-..."). The text then goes through the same
// tokenizer and rule parser as a dump (dump.go, rule.go), so both paths
// share one meaning of every option and the evidence strings are identical.
//
// What is decoded (everything else is an undecodableError: the caller falls
// back to iptables-save rather than skip the rule):
//   - native expressions iptables-nft emits for the rule header and the
//     matches it translates: payload loads of the address, protocol and
//     fragment fields (-s, -d, -p, -f), meta l4proto / iifname / oifname
//     (-p, -i, -o), transport-header ports (-m tcp/udp --sport/--dport),
//     meta mark with a mask (-m mark --mark); bitwise masks and cmp eq/neq;
//     counters (ignored); immediate verdicts (accept, drop, return, jump,
//     goto);
//   - xt compat "match" expressions: comment, tcp, udp, statistic, recent,
//     mark, addrtype (rev 1), conntrack (rev 2/3, state only), nfacct;
//   - xt compat "target" expressions: DNAT (rev 0-2), MASQUERADE, MARK
//     (rev 2), REJECT;
//   - a comment in the rule's user data (NFTNL_UDATA_RULE_COMMENT), printed
//     like iptables-nft does: as the last match.
//
// The xt info layouts are the kernel UAPI structs (include/uapi/linux/
// netfilter/xt_*.h, nf_nat.h, ipt_REJECT.h / ip6t_REJECT.h) in host byte
// order except where the struct says __be; the output formats follow the
// iptables extensions' save functions (extensions/libxt_*.c).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// undecodableError is a rule the decoder cannot render faithfully.
type undecodableError struct {
	chain  string
	handle uint64
	what   string
}

func (e *undecodableError) Error() string {
	return fmt.Sprintf("chain %s rule handle %d: %s", e.chain, e.handle, e.what)
}

// nlRule is one decoded rule.
type nlRule struct {
	chain  string
	handle uint64
	key    uint64 // nlRuleKey of its expressions and user data
	args   string // iptables-save arguments after "-A CHAIN"
	line   string // "-A CHAIN args" (args is its tail); "": build it
}

// nf_tables attribute numbers (include/uapi/linux/netfilter/nf_tables.h).
const (
	nftaRuleTable       = 1
	nftaRuleChain       = 2
	nftaRuleHandle      = 3
	nftaRuleExpressions = 4
	nftaRuleUserdata    = 7
	nftaListElem        = 1
	nftaExprName        = 1
	nftaExprData        = 2
	nftaXtName          = 1 // NFTA_MATCH_NAME / NFTA_TARGET_NAME
	nftaXtRev           = 2
	nftaXtInfo          = 3
	nftaBitwiseSreg     = 1
	nftaBitwiseDreg     = 2
	nftaBitwiseLen      = 3
	nftaBitwiseMask     = 4
	nftaBitwiseXor      = 5
	nftaBitwiseOp       = 6
	nftaDataValue       = 1
	udataRuleComment    = 0 // NFTNL_UDATA_RULE_COMMENT
)

// decodeRule decodes the attributes of one rule message (after the
// nfgenmsg header). v6 selects the ip6 header layout.
func decodeRule(v6 bool, data []byte) (nlRule, error) { return decodeRuleIn(v6, data, "") }

// decodeRuleIn is decodeRule for a message expected to be of chain: its
// name is then shared, not copied.
func decodeRuleIn(v6 bool, data []byte, chain string) (nlRule, error) {
	var r nlRule
	var exprs, udata []byte
	ad, err := newAttrs(data)
	if err != nil {
		return r, err
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case nftaRuleChain:
			if r.chain = chain; !isCString(ad.Bytes(), chain) {
				r.chain = ad.String()
			}
		case nftaRuleHandle:
			r.handle = ad.Uint64()
		case nftaRuleExpressions:
			exprs = ad.Bytes()
		case nftaRuleUserdata:
			udata = ad.Bytes()
		}
	}
	if err := ad.Err(); err != nil {
		return r, err
	}
	r.key = nlRuleKey(exprs, udata)
	b := ruleBuilder{v6: v6, port: -1}
	if err := b.exprs(exprs); err != nil {
		return r, &undecodableError{chain: r.chain, handle: r.handle, what: err.Error()}
	}
	comment, err := udataComment(udata)
	if err != nil {
		return r, &undecodableError{chain: r.chain, handle: r.handle, what: err.Error()}
	}
	r.line = b.render(r.chain, comment)
	r.args = strings.TrimPrefix(r.line[len("-A ")+len(r.chain):], " ")
	return r, nil
}

// isCString reports whether b is s, NUL-terminated or not.
func isCString(b []byte, s string) bool {
	if len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return s != "" && string(b) == s
}

// udataComment finds the comment TLV (type, length, value) in rule user data.
func udataComment(b []byte) (string, error) {
	for len(b) > 0 {
		if len(b) < 2 || int(b[1]) > len(b)-2 {
			return "", fmt.Errorf("malformed rule user data")
		}
		typ, val := b[0], b[2:2+int(b[1])]
		b = b[2+int(b[1]):]
		if typ != udataRuleComment {
			continue
		}
		if len(val) == 0 || val[len(val)-1] != 0 {
			return "", fmt.Errorf("rule user data comment is not NUL-terminated")
		}
		return string(val[:len(val)-1]), nil
	}
	return "", nil
}

// regState is what a register holds: a payload or meta load, masked.
type regState struct {
	set    bool
	base   expr.PayloadBase // 0 for meta
	meta   expr.MetaKey
	isMeta bool
	off    uint32
	len    uint32
	mask   []byte // nil: no bitwise
}

// portMatch is a tcp/udp match rebuilt from transport-header payloads.
type portMatch struct {
	name       string
	spts, dpts [2]uint16
	sinv, dinv bool
}

// ruleBuilder collects a rule's parts in iptables-save order.
type ruleBuilder struct {
	v6          bool
	regs        [32]regState
	src, dst    string
	iif, oif    string
	proto       string
	frag        string
	protoNum    int // -1 none
	protoInv    bool
	protoSet    bool
	matches     []string
	port        int // index in matches of the native tcp/udp match, -1 none
	ports       portMatch
	target      string
	haveVerdict bool
}

func (b *ruleBuilder) exprs(data []byte) error {
	ad, err := newAttrs(data)
	if err != nil {
		return err
	}
	for ad.Next() {
		if ad.Type()&^unix.NLA_F_NESTED != nftaListElem {
			return fmt.Errorf("unexpected attribute %d in the expression list", ad.Type())
		}
		if err := b.expr(ad.Bytes()); err != nil {
			return err
		}
	}
	if err := ad.Err(); err != nil {
		return err
	}
	if b.port >= 0 {
		b.matches[b.port] = b.ports.render()
	}
	return nil
}

func (b *ruleBuilder) expr(elem []byte) error {
	ad, err := newAttrs(elem)
	if err != nil {
		return err
	}
	var name string
	var data []byte
	for ad.Next() {
		switch ad.Type() &^ unix.NLA_F_NESTED {
		case nftaExprName:
			name = exprName(ad.Bytes())
		case nftaExprData:
			data = ad.Bytes()
		}
	}
	if err := ad.Err(); err != nil {
		return err
	}
	if b.haveVerdict {
		return fmt.Errorf("expression %q after the verdict", name)
	}
	switch name {
	case "counter":
		return nil
	case "payload":
		e, err := decodePayload(data)
		if err != nil {
			return err
		}
		if e.OperationType != expr.PayloadLoad || e.DestRegister >= uint32(len(b.regs)) || e.Len == 0 {
			return fmt.Errorf("payload write or bad register")
		}
		b.regs[e.DestRegister] = regState{set: true, base: e.Base, off: e.Offset, len: e.Len}
		return nil
	case "meta":
		e, err := decodeMeta(data)
		if err != nil {
			return err
		}
		if e.SourceRegister || e.Register >= uint32(len(b.regs)) {
			return fmt.Errorf("meta set (writes packet metadata)")
		}
		b.regs[e.Register] = regState{set: true, isMeta: true, meta: e.Key}
		return nil
	case "bitwise":
		return b.bitwise(data)
	case "cmp":
		e, err := decodeCmp(data)
		if err != nil {
			return err
		}
		return b.cmp(&e)
	case "immediate":
		reg, v, err := decodeImmediate(data)
		if err != nil {
			return err
		}
		if reg != unix.NFT_REG_VERDICT {
			return fmt.Errorf("immediate into a data register")
		}
		return b.verdict(v)
	case "match", "target":
		xname, rev, info, err := xtAttrs(data)
		if err != nil {
			return err
		}
		if name == "match" {
			s, err := renderMatch(b.v6, xname, rev, info)
			if err != nil {
				return err
			}
			b.matches = append(b.matches, s)
			return nil
		}
		if b.target != "" {
			return fmt.Errorf("two targets")
		}
		s, err := renderTarget(b.v6, xname, rev, info)
		if err != nil {
			return err
		}
		b.target = s
		return nil
	}
	return fmt.Errorf("expression %q not decoded", name)
}

// exprNames are the expression names the builder reads, shared rather
// than allocated per expression.
var exprNames = []string{"counter", "payload", "meta", "bitwise", "cmp", "immediate", "match", "target"}

// exprName is an expression's name (NUL-terminated in the message).
func exprName(b []byte) string {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	for _, n := range exprNames {
		if string(b) == n {
			return n
		}
	}
	return string(b)
}

// xtAttrs reads a match or target expression: extension name, revision, info.
func xtAttrs(data []byte) (string, uint32, []byte, error) {
	ad, err := newAttrs(data)
	if err != nil {
		return "", 0, nil, err
	}
	ad.ByteOrder = binary.BigEndian
	var name string
	var rev uint32
	var info []byte
	for ad.Next() {
		switch ad.Type() {
		case nftaXtName:
			name = string(bytes.TrimRight(ad.Bytes(), "\x00"))
		case nftaXtRev:
			rev = ad.Uint32()
		case nftaXtInfo:
			info = ad.Bytes()
		}
	}
	return name, rev, info, ad.Err()
}

func (b *ruleBuilder) bitwise(data []byte) error {
	ad, err := newAttrs(data)
	if err != nil {
		return err
	}
	ad.ByteOrder = binary.BigEndian
	var sreg, dreg, n uint32
	var mask, xor []byte
	for ad.Next() {
		switch ad.Type() &^ unix.NLA_F_NESTED {
		case nftaBitwiseSreg:
			sreg = ad.Uint32()
		case nftaBitwiseDreg:
			dreg = ad.Uint32()
		case nftaBitwiseLen:
			n = ad.Uint32()
		case nftaBitwiseMask:
			mask = dataValue(ad.Bytes())
		case nftaBitwiseXor:
			xor = dataValue(ad.Bytes())
		case nftaBitwiseOp:
			if op := ad.Uint32(); op != 0 { // NFT_BITWISE_MASK_XOR (formerly BOOL)
				return fmt.Errorf("bitwise operation %d (shift or boolean)", op)
			}
		default:
			return fmt.Errorf("bitwise attribute %d", ad.Type())
		}
	}
	if err := ad.Err(); err != nil {
		return err
	}
	if sreg != dreg || sreg >= uint32(len(b.regs)) || !b.regs[sreg].set || b.regs[sreg].mask != nil ||
		int(n) != len(mask) || len(xor) != len(mask) || !allZero(xor) {
		return fmt.Errorf("bitwise other than a mask of a loaded field")
	}
	b.regs[sreg].mask = mask
	return nil
}

// dataValue unwraps NFTA_DATA_VALUE.
func dataValue(nested []byte) []byte {
	ad, err := newAttrs(nested)
	if err != nil {
		return nil
	}
	for ad.Next() {
		if ad.Type() == nftaDataValue {
			return ad.Bytes()
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (b *ruleBuilder) verdict(v expr.Verdict) error {
	if b.target != "" {
		return fmt.Errorf("a verdict after a target")
	}
	switch v.Kind {
	case expr.VerdictAccept:
		b.target = " -j ACCEPT"
	case expr.VerdictDrop:
		b.target = " -j DROP"
	case expr.VerdictReturn:
		b.target = " -j RETURN"
	case expr.VerdictJump:
		b.target = " -j " + v.Chain
	case expr.VerdictGoto:
		b.target = " -g " + v.Chain
	default:
		return fmt.Errorf("verdict %d", v.Kind)
	}
	if v.Kind == expr.VerdictJump || v.Kind == expr.VerdictGoto {
		if v.Chain == "" || strings.ContainsAny(v.Chain, " \t\"\\") {
			return fmt.Errorf("jump to chain %q", v.Chain)
		}
	}
	b.haveVerdict = true
	return nil
}

// cmp interprets a comparison of a loaded register.
func (b *ruleBuilder) cmp(e *expr.Cmp) error {
	if e.Register >= uint32(len(b.regs)) || !b.regs[e.Register].set {
		return fmt.Errorf("cmp of an unloaded register")
	}
	r := b.regs[e.Register]
	b.regs[e.Register] = regState{}
	var inv bool
	switch e.Op {
	case expr.CmpOpEq:
	case expr.CmpOpNeq:
		inv = true
	default:
		return fmt.Errorf("cmp operation %d", e.Op)
	}
	if r.isMeta {
		return b.cmpMeta(r, e.Data, inv)
	}
	if r.mask != nil && len(r.mask) != len(e.Data) || int(r.len) != len(e.Data) {
		return fmt.Errorf("cmp length %d of a %d-byte load", len(e.Data), r.len)
	}
	switch r.base {
	case expr.PayloadBaseNetworkHeader:
		return b.cmpNetwork(r, e.Data, inv)
	case expr.PayloadBaseTransportHeader:
		return b.cmpTransport(r, e.Data, inv)
	}
	return fmt.Errorf("payload base %d", r.base)
}

func (b *ruleBuilder) cmpMeta(r regState, data []byte, inv bool) error {
	switch r.meta {
	case expr.MetaKeyL4PROTO:
		if r.mask != nil || len(data) != 1 {
			return fmt.Errorf("masked or wide l4proto")
		}
		return b.setProto(int(data[0]), inv)
	case expr.MetaKeyIIFNAME, expr.MetaKeyOIFNAME:
		if r.mask != nil {
			return fmt.Errorf("masked interface name")
		}
		name, ok := ifaceName(data)
		if !ok {
			return fmt.Errorf("interface name %q", data)
		}
		s := ""
		if name != "+" || inv {
			s = " -i " + name
			if r.meta == expr.MetaKeyOIFNAME {
				s = " -o " + name
			}
			if inv {
				s = " !" + s
			}
		}
		if r.meta == expr.MetaKeyIIFNAME {
			b.iif = s
		} else {
			b.oif = s
		}
		return nil
	case expr.MetaKeyMARK:
		if len(data) != 4 {
			return fmt.Errorf("mark of %d bytes", len(data))
		}
		mark := binary.NativeEndian.Uint32(data)
		mask := uint32(0xffffffff)
		if r.mask != nil {
			if len(r.mask) != 4 {
				return fmt.Errorf("mark mask of %d bytes", len(r.mask))
			}
			mask = binary.NativeEndian.Uint32(r.mask)
		}
		s := " -m mark"
		if inv {
			s += " !"
		}
		b.matches = append(b.matches, s+" --mark"+valMask(mark, mask))
		return nil
	}
	return fmt.Errorf("meta key %d", r.meta)
}

// ifaceName turns a compared interface name into iptables syntax: a
// NUL-terminated name is exact, a shorter prefix is a "+" wildcard.
func ifaceName(data []byte) (string, bool) {
	if len(data) == 0 || len(data) > unix.IFNAMSIZ {
		return "", false
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		if !allZero(data[i:]) || i == 0 {
			return "", false
		}
		return string(data[:i]), true
	}
	return string(data) + "+", true
}

func (b *ruleBuilder) setProto(p int, inv bool) error {
	if b.protoSet {
		return fmt.Errorf("two protocol matches")
	}
	b.protoSet, b.protoNum, b.protoInv = true, p, inv
	s := " -p " + protoName(p)
	if inv {
		s = " !" + s
	}
	b.proto = s
	return nil
}

// protoName is the name iptables-save prints for a protocol number
// (xtables_chain_protos; no /etc/protocols lookup), else the number.
func protoName(p int) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_UDPLITE:
		return "udplite"
	case unix.IPPROTO_ICMP:
		return "icmp"
	case unix.IPPROTO_ICMPV6:
		return "ipv6-icmp"
	case unix.IPPROTO_ESP:
		return "esp"
	case unix.IPPROTO_AH:
		return "ah"
	case unix.IPPROTO_SCTP:
		return "sctp"
	case unix.IPPROTO_MH:
		return "mobility-header"
	case unix.IPPROTO_DCCP:
		return "dccp"
	case unix.IPPROTO_COMP:
		return "ipcomp"
	}
	return strconv.Itoa(p)
}

// cmpNetwork: source/destination address, protocol, fragment bit.
func (b *ruleBuilder) cmpNetwork(r regState, data []byte, inv bool) error {
	alen, soff, doff := uint32(4), uint32(12), uint32(16)
	if b.v6 {
		alen, soff, doff = 16, 8, 24
	}
	switch {
	case (r.off == soff || r.off == doff) && r.len <= alen:
		addr := make([]byte, alen)
		mask := make([]byte, alen)
		copy(addr, data)
		if r.mask != nil {
			copy(mask, r.mask)
		} else {
			for i := uint32(0); i < r.len; i++ {
				mask[i] = 0xff
			}
		}
		for i := range addr {
			if addr[i]&^mask[i] != 0 {
				return fmt.Errorf("address bits outside the mask")
			}
		}
		letter := "s"
		if r.off == doff {
			letter = "d"
		}
		s := renderAddr(b.v6, letter, addr, mask, inv)
		if letter == "s" {
			b.src = s
		} else {
			b.dst = s
		}
		return nil
	case !b.v6 && r.off == 9 && r.len == 1 && r.mask == nil:
		return b.setProto(int(data[0]), inv)
	case !b.v6 && r.off == 6 && r.len == 2 && bytes.Equal(r.mask, []byte{0x1f, 0xff}) && allZero(data):
		// fragment offset != 0: "-f"; == 0: "! -f"
		if inv {
			b.frag = " -f"
		} else {
			b.frag = " ! -f"
		}
		return nil
	}
	return fmt.Errorf("network header field at offset %d, %d bytes", r.off, r.len)
}

// renderAddr prints "-s addr/mask" as save_ipv4_addr / save_ipv6_addr do.
func renderAddr(v6 bool, letter string, addr, mask []byte, inv bool) string {
	ones, contiguous := prefixLen(mask)
	if !inv && ones == 0 && (v6 || allZero(addr)) {
		return ""
	}
	var a, m netip.Addr
	if v6 {
		a, m = netip.AddrFrom16([16]byte(addr)), netip.AddrFrom16([16]byte(mask))
	} else {
		a, m = netip.AddrFrom4([4]byte(addr)), netip.AddrFrom4([4]byte(mask))
	}
	s := " -" + letter + " " + a.String() + "/"
	if contiguous {
		s += strconv.Itoa(ones)
	} else {
		s += m.String()
	}
	if inv {
		s = " !" + s
	}
	return s
}

// prefixLen counts the leading ones of a mask and says if it is a prefix.
func prefixLen(mask []byte) (int, bool) {
	ones := 0
	for i, c := range mask {
		if c == 0xff {
			ones += 8
			continue
		}
		for c&0x80 != 0 {
			ones++
			c <<= 1
		}
		if c != 0 || !allZero(mask[i+1:]) {
			return ones, false
		}
		return ones, true
	}
	return ones, true
}

// cmpTransport: tcp/udp ports as iptables-nft translates --sport/--dport.
func (b *ruleBuilder) cmpTransport(r regState, data []byte, inv bool) error {
	if r.mask != nil {
		return fmt.Errorf("masked transport header field (tcp flags?)")
	}
	if !b.protoSet || b.protoInv || (b.protoNum != unix.IPPROTO_TCP && b.protoNum != unix.IPPROTO_UDP) {
		return fmt.Errorf("transport header match without -p tcp or -p udp")
	}
	if b.port < 0 {
		b.port = len(b.matches)
		b.matches = append(b.matches, "")
		b.ports = portMatch{name: protoName(b.protoNum), spts: [2]uint16{0, 0xffff}, dpts: [2]uint16{0, 0xffff}}
	}
	p := &b.ports
	switch {
	case r.off == 0 && r.len == 2:
		v := binary.BigEndian.Uint16(data)
		p.spts, p.sinv = [2]uint16{v, v}, inv
	case r.off == 2 && r.len == 2:
		v := binary.BigEndian.Uint16(data)
		p.dpts, p.dinv = [2]uint16{v, v}, inv
	case r.off == 0 && r.len == 4 && !inv:
		s, d := binary.BigEndian.Uint16(data), binary.BigEndian.Uint16(data[2:])
		p.spts, p.dpts = [2]uint16{s, s}, [2]uint16{d, d}
	default:
		return fmt.Errorf("transport header field at offset %d, %d bytes", r.off, r.len)
	}
	return nil
}

// render prints a tcp/udp match as tcp_save / udp_save do.
func (p *portMatch) render() string {
	s := " -m " + p.name
	s += portOpt("--sport", p.spts, p.sinv)
	s += portOpt("--dport", p.dpts, p.dinv)
	return s
}

func portOpt(opt string, pts [2]uint16, inv bool) string {
	if pts[0] == 0 && pts[1] == 0xffff && !inv {
		return ""
	}
	s := ""
	if inv {
		s = " !"
	}
	if pts[0] != pts[1] {
		return s + fmt.Sprintf(" %s %d:%d", opt, pts[0], pts[1])
	}
	return s + fmt.Sprintf(" %s %d", opt, pts[0])
}

// valMask prints a mark as xtables_print_val_mask does.
func valMask(v, mask uint32) string {
	if mask != 0xffffffff {
		return fmt.Sprintf(" 0x%x/0x%x", v, mask)
	}
	return fmt.Sprintf(" 0x%x", v)
}

// render joins the parts the way iptables-nft-save prints a rule.
// render returns the rule's line, "-A CHAIN" and its parts, in one
// allocation (but a comment that needs quoting).
func (b *ruleBuilder) render(chain, udataComment string) string {
	opt, comment := "", ""
	if udataComment != "" {
		opt, comment = " -m comment --comment", saveString(udataComment)
	}
	parts := [...]string{"-A ", chain, b.src, b.dst, b.iif, b.oif, b.proto, b.frag, "", opt, comment, b.target}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	for _, m := range b.matches {
		n += len(m)
	}
	var s strings.Builder
	s.Grow(n)
	for i, p := range parts {
		if i == 8 {
			for _, m := range b.matches {
				s.WriteString(m)
			}
		}
		s.WriteString(p)
	}
	return s.String()
}

// saveString quotes a value as xtables_save_string does (leading space).
func saveString(v string) string {
	plain := v != ""
	for i := 0; i < len(v) && plain; i++ {
		c := v[i]
		plain = c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if plain {
		return " " + v
	}
	var s strings.Builder
	s.WriteString(` "`)
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '"' || c == '\\' || c == '\'' {
			s.WriteByte('\\')
		}
		s.WriteByte(v[i])
	}
	s.WriteByte('"')
	return s.String()
}

// cString reads a NUL-terminated string from a fixed-size field.
func cString(b []byte) (string, bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", false
	}
	return string(b[:i]), true
}
