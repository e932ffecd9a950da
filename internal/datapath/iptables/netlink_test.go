package iptables

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TestDecodeRuleCaptured decodes rule messages the kernel dumped (origin:
// testdata/netlink-rules.hex) into exactly what iptables-nft-save printed.
func TestDecodeRuleCaptured(t *testing.T) {
	f, err := os.Open("testdata/netlink-rules.hex")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want string
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "args "):
			want = line[5:]
		case strings.HasPrefix(line, "hex "):
			b, err := hex.DecodeString(line[4:])
			if err != nil {
				t.Fatal(err)
			}
			r, err := decodeRule(false, b)
			if err != nil {
				t.Fatalf("%s: %v", want, err)
			}
			if r.args != want {
				t.Errorf("decoded %q\nwant    %q", r.args, want)
			}
			n++
		}
	}
	if n < 5 {
		t.Fatalf("only %d vectors", n)
	}
}

// attrs builds messages from the nf_tables attribute layout
// (include/uapi/linux/netfilter/nf_tables.h) for the synthetic vectors.
func attrs(t *testing.T, as ...netlink.Attribute) []byte {
	t.Helper()
	b, err := netlink.MarshalAttributes(as)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func exprAttr(t *testing.T, name string, data []byte) netlink.Attribute {
	return netlink.Attribute{Type: unix.NLA_F_NESTED | nftaListElem, Data: attrs(t,
		netlink.Attribute{Type: nftaExprName, Data: cstr(name)},
		netlink.Attribute{Type: unix.NLA_F_NESTED | nftaExprData, Data: data})}
}

func xtExpr(t *testing.T, kind, name string, rev uint32, info []byte) netlink.Attribute {
	r := make([]byte, 4)
	binary.BigEndian.PutUint32(r, rev)
	return exprAttr(t, kind, attrs(t,
		netlink.Attribute{Type: nftaXtName, Data: cstr(name)},
		netlink.Attribute{Type: nftaXtRev, Data: r},
		netlink.Attribute{Type: nftaXtInfo, Data: info}))
}

func ruleMsg(t *testing.T, udata []byte, exprs ...netlink.Attribute) []byte {
	as := []netlink.Attribute{
		{Type: nftaRuleTable, Data: cstr("nat")},
		{Type: nftaRuleChain, Data: cstr("KUBE-TEST")},
		{Type: unix.NLA_F_NESTED | nftaRuleExpressions, Data: attrs(t, exprs...)},
	}
	if udata != nil {
		as = append(as, netlink.Attribute{Type: nftaRuleUserdata, Data: udata})
	}
	return attrs(t, as...)
}

// TestDecodeRuleUserDataComment: a comment in the rule's user data
// (NFTNL_UDATA_RULE_COMMENT TLV) prints as the last match, as iptables-nft
// 1.8.10+ prints it (nft_rule_to_iptables_command_state).
func TestDecodeRuleUserDataComment(t *testing.T) {
	comment := "ns/svc:http cluster IP"
	ud := append([]byte{udataRuleComment, byte(len(comment) + 1)}, cstr(comment)...)
	b := ruleMsg(t, ud, xtExpr(t, "match", "statistic", 0, statisticInfo(0, 0, 0x40000000)))
	r, err := decodeRule(false, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := `-m statistic --mode random --probability 0.50000000000 -m comment --comment "ns/svc:http cluster IP"`; r.args != want {
		t.Errorf("got %q, want %q", r.args, want)
	}
	if _, err := decodeRule(false, ruleMsg(t, []byte{0, 3, 'a', 'b'})); err == nil {
		t.Error("unterminated user-data comment accepted")
	}
}

// statisticInfo builds an xt_statistic_info (u16 mode, u16 flags, u32 u[3], 8-byte pointer).
func statisticInfo(mode, flags uint16, v uint32) []byte {
	b := make([]byte, 24)
	ne.PutUint16(b, mode)
	ne.PutUint16(b[2:], flags)
	ne.PutUint32(b[4:], v)
	return b
}

// TestXtDecoders: the info blobs, built from the UAPI layouts, render as
// the iptables extensions' save functions print them.
func TestXtDecoders(t *testing.T) {
	mark := make([]byte, 8)
	ne.PutUint32(mark, 0x4000)
	ne.PutUint32(mark[4:], 0x4000)
	addrtype := make([]byte, 8)
	ne.PutUint16(addrtype[2:], 1<<2) // dest LOCAL
	ne.PutUint32(addrtype[4:], 2)    // XT_ADDRTYPE_INVERT_DEST
	ct := make([]byte, 164)
	ne.PutUint16(ct[146:], 1)                   // XT_CONNTRACK_STATE
	ne.PutUint16(ct[150:], 1<<2|1<<1)           // RELATED, ESTABLISHED
	reject := []byte{3, 0, 0, 0}                // IPT_ICMP_PORT_UNREACHABLE
	dnat6 := make([]byte, 44)                   // nf_nat_range2
	ne.PutUint32(dnat6, natMapIPs|natProtoSpec) // flags
	copy(dnat6[4:], []byte{0xfd, 0, 15: 1})
	copy(dnat6[20:], []byte{0xfd, 0, 15: 1})
	binary.BigEndian.PutUint16(dnat6[36:], 8080)
	binary.BigEndian.PutUint16(dnat6[38:], 8080)
	masq := make([]byte, 20) // nf_nat_ipv4_multi_range_compat
	ne.PutUint32(masq, 1)
	ne.PutUint32(masq[4:], natRandomFully)
	for _, tc := range []struct {
		kind, name string
		rev        uint32
		v6         bool
		info       []byte
		want       string
	}{
		{"match", "statistic", 0, false, statisticInfo(0, 0, 0x0CCCCCCD), " -m statistic --mode random --probability 0.10000000009"},
		{"match", "statistic", 0, false, statisticInfo(1, 1, 2), " -m statistic --mode nth ! --every 3 --packet 0"},
		{"match", "mark", 1, false, append(mark, 1, 0, 0, 0), " -m mark ! --mark 0x4000/0x4000"},
		{"match", "addrtype", 1, false, addrtype, " -m addrtype ! --dst-type LOCAL"},
		{"match", "conntrack", 3, false, ct, " -m conntrack --ctstate RELATED,ESTABLISHED"},
		{"target", "MARK", 2, false, mark, " -j MARK --set-xmark 0x4000/0x4000"},
		{"target", "REJECT", 0, false, reject, " -j REJECT --reject-with icmp-port-unreachable"},
		{"target", "REJECT", 0, true, reject, " -j REJECT --reject-with icmp6-addr-unreachable"},
		{"target", "DNAT", 2, true, dnat6, " -j DNAT --to-destination [fd00::1]:8080"},
		{"target", "MASQUERADE", 0, false, masq, " -j MASQUERADE --random-fully"},
	} {
		var got string
		var err error
		if tc.kind == "match" {
			got, err = renderMatch(tc.v6, tc.name, tc.rev, tc.info)
		} else {
			got, err = renderTarget(tc.v6, tc.name, tc.rev, tc.info)
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %s rev %d: got %q, %v; want %q", tc.kind, tc.name, tc.rev, got, err, tc.want)
		}
	}
	// What is not decoded is an error, never an empty rendering.
	for _, tc := range []struct {
		name string
		rev  uint32
		info []byte
	}{
		{"string", 1, make([]byte, 100)},
		{"statistic", 0, statisticInfo(2, 0, 0)}, // unknown mode
		{"statistic", 0, make([]byte, 8)},        // truncated
		{"conntrack", 3, append(make([]byte, 146), 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)}, // --ctorigsrc
		{"comment", 1, make([]byte, 256)},
	} {
		if s, err := renderMatch(false, tc.name, tc.rev, tc.info); err == nil {
			t.Errorf("match %s rev %d decoded as %q", tc.name, tc.rev, s)
		}
	}
}

// TestDecodeRuleRefusesUnknown: expressions outside the decoded set make
// the rule undecodable (an undecodableError naming the expression).
func TestDecodeRuleRefusesUnknown(t *testing.T) {
	for _, tc := range []struct {
		what string
		e    netlink.Attribute
	}{
		{"lookup", exprAttr(t, "lookup", attrs(t, netlink.Attribute{Type: 1, Data: cstr("set")}))},
		{"limit", exprAttr(t, "limit", nil)},
		{"xt string", xtExpr(t, "match", "string", 1, make([]byte, 100))},
		{"xt LOG", xtExpr(t, "target", "LOG", 0, make([]byte, 36))},
	} {
		_, err := decodeRule(false, ruleMsg(t, nil, tc.e))
		var ue *undecodableError
		if !errors.As(err, &ue) || ue.chain != "KUBE-TEST" {
			t.Errorf("%s: got %v, want an undecodableError for chain KUBE-TEST", tc.what, err)
		}
	}
}

// TestRenderAddr: address/mask printing as save_ipv4_addr / save_ipv6_addr.
func TestRenderAddr(t *testing.T) {
	for _, tc := range []struct {
		v6         bool
		addr, mask []byte
		inv        bool
		want       string
	}{
		{false, []byte{10, 214, 0, 0}, []byte{255, 255, 0, 0}, true, " ! -s 10.214.0.0/16"},
		{false, []byte{10, 0, 0, 1}, []byte{255, 0, 255, 255}, false, " -s 10.0.0.1/255.0.255.255"},
		{false, []byte{0, 0, 0, 0}, []byte{0, 0, 0, 0}, false, ""},
		{true, bytes.Repeat([]byte{0}, 16), bytes.Repeat([]byte{0}, 16), true, " ! -s ::/0"},
	} {
		if got := renderAddr(tc.v6, "s", tc.addr, tc.mask, tc.inv); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	if got := saveString(`a "b"\c`); got != ` "a \"b\"\\c"` {
		t.Errorf("saveString: %q", got)
	}
}
