package iptables

import "encoding/binary"

// install turns the patched list into the chain's rules: a rule whose key
// the chain held keeps that rule's parse, the others are decoded. A chain
// that comes out with the same rules keeps its object (and the walk's
// results on it); only the handles are updated.
func (p *chainPatch) install(v6 bool, t *ipTable, name string, n *NFTReader) patchResult {
	old := p.old
	if !p.exists {
		if old == nil {
			return patchSame
		}
		old.dead = true
		delete(t.chains, name)
		return patchDone
	}
	var pool map[uint64][]nlSlot
	slots := make([]nlSlot, 0, len(p.at))
	rules := make([]*ipRule, 0, len(p.at))
	for i := p.head; i >= 0; i = p.nodes[i].next {
		nd := p.nodes[i]
		s := nd.s
		if nd.data != nil {
			if pool == nil {
				pool = oldRulePool(old)
			}
			var ok bool
			if s, ok = p.fresh(v6, t, name, nd, pool, n); !ok {
				return patchRead
			}
		}
		slots = append(slots, s)
		if s.rule != nil {
			rules = append(rules, s.rule)
		}
	}
	if old != nil && samePtrs(old.rules, rules) {
		old.nl, old.handle = slots, p.handle
		return patchSame
	}
	if old != nil {
		old.dead = true
	}
	t.chains[name] = &ipChain{name: name, handle: p.handle, nl: slots, rules: rules}
	return patchDone
}

// fresh gives a new rule's slot: the parse of an old rule with the same
// key, or the message decoded.
func (p *chainPatch) fresh(v6 bool, t *ipTable, name string, nd patchNode, pool map[uint64][]nlSlot, n *NFTReader) (nlSlot, bool) {
	key, ok := nlMsgKey(nd.data)
	if !ok {
		return nlSlot{}, false
	}
	if olds := pool[key]; len(olds) > 0 {
		s := olds[0]
		pool[key] = olds[1:]
		return nlSlot{handle: nd.s.handle, key: key, rule: s.rule}, true
	}
	r, err := decodeRule(v6, nd.data)
	if err != nil || r.chain != name || r.handle != nd.s.handle {
		return nlSlot{}, false
	}
	line := "-A " + r.chain
	if r.args != "" {
		line += " " + r.args
	}
	ir, err := t.parseNLRule(name, line, false)
	if err != nil {
		return nlSlot{}, false
	}
	n.stats.LastDecoded++
	return nlSlot{handle: r.handle, key: r.key, rule: ir}, true
}

// oldRulePool indexes a chain's rules by key, in chain order.
func oldRulePool(old *ipChain) map[uint64][]nlSlot {
	if old == nil {
		return map[uint64][]nlSlot{}
	}
	m := make(map[uint64][]nlSlot, len(old.nl))
	for _, s := range old.nl {
		m[s.key] = append(m[s.key], s)
	}
	return m
}

func samePtrs(a, b []*ipRule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// nlMsgKey is nlRuleKey of a rule message's attributes.
func nlMsgKey(data []byte) (uint64, bool) {
	var exprs, udata []byte
	for b := data; len(b) > 0; {
		if len(b) < 4 {
			return 0, false
		}
		n := int(binary.NativeEndian.Uint16(b))
		if n < 4 || n > len(b) {
			return 0, false
		}
		switch binary.NativeEndian.Uint16(b[2:]) & 0x3fff {
		case nftaRuleExpressions:
			exprs = b[4:n]
		case nftaRuleUserdata:
			udata = b[4:n]
		}
		b = b[min(len(b), (n+3)&^3):]
	}
	return nlRuleKey(exprs, udata), true
}
