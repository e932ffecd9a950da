package iptables

import (
	"encoding/binary"
	"hash/maphash"
)

// A rule's key identifies its content: the expressions and user data of
// its netlink message, counters left out (a dump gives the packets and
// bytes counted so far, a notification those the rule was created with).
// Two messages with the same key decode to the same rule, so a rule the
// kernel deleted and added again unchanged (kube-proxy flushes and re-adds
// every chain it writes) keeps its decoded form (netlink_ops.go). 64 bits
// of a keyed hash: a collision between two different rules of one chain
// is not a practical concern, and the periodic audit read would find it.

var ruleKeySeed = maphash.MakeSeed()

// nlRuleKey hashes a rule's expression list and user data.
func nlRuleKey(exprs, udata []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(ruleKeySeed)
	for b := exprs; len(b) >= 4; {
		n := int(binary.NativeEndian.Uint16(b))
		if n < 4 || n > len(b) {
			_, _ = h.Write(b) // malformed: hash it whole (decoding will refuse it)
			break
		}
		elem := b[4:n]
		if isCounterExpr(elem) {
			_, _ = h.WriteString("counter")
		} else {
			_, _ = h.Write(elem)
		}
		_ = h.WriteByte(0)
		b = b[min(len(b), (n+3)&^3):]
	}
	_ = h.WriteByte(1)
	_, _ = h.Write(udata)
	return h.Sum64()
}

// isCounterExpr reports whether one expression element (the attributes of
// an NFTA_LIST_ELEM) is named "counter".
func isCounterExpr(elem []byte) bool {
	for b := elem; len(b) >= 4; {
		n := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & 0x3fff
		if n < 4 || n > len(b) {
			return false
		}
		if typ == nftaExprName {
			return string(b[4:n]) == "counter\x00"
		}
		b = b[min(len(b), (n+3)&^3):]
	}
	return false
}
