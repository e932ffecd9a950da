package nftables

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
)

// nftRegKind says what a register holds while a rule's expressions run.
type nftRegKind int

const (
	nftRegOther   nftRegKind = iota // payload, ct, fib, mark...: matching on it is a condition
	nftRegL4Proto                   // meta l4proto
	nftRegImm                       // immediate data
	nftRegMapData                   // result of a lookup in a data map
)

type nftReg struct {
	kind nftRegKind
	data []byte // immediate data
	set  string // map name for nftRegMapData
}

// convertRule reduces a netlink rule the way parseNFTJSONRule reduces its
// JSON form (see nftRule).
func (r *nftNetlinkReader) convertRule(nr *nftables.Rule) (nftRule, error) {
	out := nftRule{Handle: nr.Handle}
	if c, ok := userdata.GetString(nr.UserData, userdata.TypeComment); ok {
		out.Comment = c
	}
	regs := map[uint32]nftReg{}
	for _, e := range nr.Exprs {
		if err := r.convertExpr(e, regs, &out); err != nil {
			return out, err
		}
	}
	out.normalize()
	return out, nil
}

func (r *nftNetlinkReader) convertExpr(e expr.Any, regs map[uint32]nftReg, out *nftRule) error {
	switch x := e.(type) {
	case *expr.Meta:
		if !x.SourceRegister {
			k := nftRegOther
			if x.Key == expr.MetaKeyL4PROTO {
				k = nftRegL4Proto
			}
			regs[x.Register] = nftReg{kind: k}
		}
	case *expr.Payload:
		regs[x.DestRegister] = nftReg{kind: nftRegOther}
	case *expr.Bitwise:
		regs[x.DestRegister] = nftReg{kind: nftRegOther}
	case *expr.Ct:
		if !x.SourceRegister {
			regs[x.Register] = nftReg{kind: nftRegOther}
		}
	case *expr.Fib:
		regs[x.Register] = nftReg{kind: nftRegOther}
	case *expr.Numgen:
		regs[x.Register] = nftReg{kind: nftRegOther}
	case *expr.Immediate:
		regs[x.Register] = nftReg{kind: nftRegImm, data: x.Data}
	case *expr.Cmp:
		reg := regs[x.Register]
		if reg.kind == nftRegL4Proto && x.Op == expr.CmpOpEq && len(x.Data) == 1 {
			out.Proto = nftProtoName(x.Data[0])
		} else {
			out.Conditional = true
		}
	case *expr.Range:
		out.Conditional = true
	case *expr.Lookup:
		return r.convertLookup(x, regs, out)
	case *expr.Verdict:
		out.Verdict = nftVerdictOf(x)
	case *expr.Reject:
		out.Verdict = nftVerdict{Kind: nftVerdictReject}
	case *expr.NAT:
		if x.Type == expr.NATTypeDestNAT {
			return r.convertDNAT(x, regs, out)
		}
	}
	// Counters, set updates (dynset), masquerade, logging: no decision.
	return nil
}

func (r *nftNetlinkReader) convertLookup(x *expr.Lookup, regs map[uint32]nftReg, out *nftRule) error {
	switch {
	case x.IsDestRegSet && x.DestRegister == 0 && !x.Invert: // verdict map
		if len(x.SetName) > 2 && x.SetName[:2] == "__" {
			return r.anonVMap(x.SetName, out)
		}
		out.MapRef = x.SetName
	case x.IsDestRegSet: // data map
		regs[x.DestRegister] = nftReg{kind: nftRegMapData, set: x.SetName}
	default: // set membership: a condition
		out.Conditional = true
	}
	return nil
}

// anonVMap reads an anonymous verdict map ("numgen ... vmap { ... }").
func (r *nftNetlinkReader) anonVMap(name string, out *nftRule) error {
	els, _, err := r.elements(name)
	if err != nil {
		return err
	}
	for _, el := range els {
		v, err := nftElemVerdict(el)
		if err != nil {
			return fmt.Errorf("vmap %s: %w", name, err)
		}
		out.VMap = append(out.VMap, v)
	}
	return nil
}

// convertDNAT resolves a dnat statement's address and port registers.
func (r *nftNetlinkReader) convertDNAT(x *expr.NAT, regs map[uint32]nftReg, out *nftRule) error {
	n := r.addrLen()
	addr := regs[x.RegAddrMin]
	switch addr.kind {
	case nftRegImm:
		a, ok := netip.AddrFromSlice(addr.data)
		if !ok {
			return fmt.Errorf("dnat address %x", addr.data)
		}
		var port uint16
		if p := regs[x.RegProtoMin]; x.RegProtoMin != 0 && p.kind == nftRegImm && len(p.data) >= 2 {
			port = binary.BigEndian.Uint16(p.data)
		}
		out.DNAT = append(out.DNAT, netip.AddrPortFrom(a.Unmap(), port))
	case nftRegMapData:
		els, _, err := r.elements(addr.set)
		if err != nil {
			return err
		}
		for _, el := range els {
			if len(el.Val) < n+2 {
				return fmt.Errorf("dnat map %s: value %x too short", addr.set, el.Val)
			}
			a, _ := netip.AddrFromSlice(el.Val[:n])
			port := binary.BigEndian.Uint16(el.Val[n : n+2])
			out.DNAT = append(out.DNAT, netip.AddrPortFrom(a.Unmap(), port))
		}
	default:
		return fmt.Errorf("dnat from an unsupported expression")
	}
	return nil
}

// normalize orders what netlink and JSON may list in different orders and
// renders the rule once.
func (r *nftRule) normalize() {
	sort.SliceStable(r.DNAT, func(i, j int) bool { return nftAddrPortLess(r.DNAT[i], r.DNAT[j]) })
	sort.SliceStable(r.VMap, func(i, j int) bool { return r.VMap[i].String() < r.VMap[j].String() })
	r.text = r.render()
}

func nftAddrPortLess(a, b netip.AddrPort) bool {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c < 0
	}
	return a.Port() < b.Port()
}
