package iptables

import (
	"encoding/binary"
	"slices"
)

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
		t.dropChain(name)
		return patchDone
	}
	pool := rulePool{old: old}
	slots := make([]nlSlot, 0, len(p.at))
	rules := make([]*ipRule, 0, len(p.at))
	for i := p.head; i >= 0; i = p.nodes[i].next {
		nd := p.nodes[i]
		s := nd.s
		if nd.data != nil {
			var ok bool
			if s, ok = p.fresh(v6, t, name, nd, &pool, n); !ok {
				return patchRead
			}
		}
		slots = append(slots, s)
		if s.rule != nil {
			rules = append(rules, s.rule)
		}
	}
	if old != nil && slices.Equal(old.rules, rules) {
		old.nl, old.handle = slots, p.handle
		t.noteHandle(name, p.handle)
		return patchSame
	}
	t.setChain(&ipChain{name: name, handle: p.handle, nl: slots, rules: rules})
	return patchDone
}

// fresh gives a new rule's slot: the parse of an old rule with the same
// key, or the message decoded.
func (p *chainPatch) fresh(v6 bool, t *ipTable, name string, nd patchNode, pool *rulePool, n *NFTReader) (nlSlot, bool) {
	key, ok := nlMsgKey(nd.data)
	if !ok {
		return nlSlot{}, false
	}
	if s, ok := pool.take(key); ok {
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

// rulePool hands out a chain's old rules by key, each once. Rules added
// again in the order they were (a flushed chain written again) are taken
// in order, without an index; the first other key indexes the rest.
type rulePool struct {
	old   *ipChain
	next  int                 // old.nl[next:] not taken yet (before byKey exists)
	byKey map[uint64][]nlSlot // nil until needed
}

func (pl *rulePool) take(key uint64) (nlSlot, bool) {
	if pl.old == nil {
		return nlSlot{}, false
	}
	if pl.byKey == nil {
		if pl.next < len(pl.old.nl) && pl.old.nl[pl.next].key == key {
			pl.next++
			return pl.old.nl[pl.next-1], true
		}
		pl.byKey = make(map[uint64][]nlSlot, len(pl.old.nl)-pl.next)
		for _, s := range pl.old.nl[pl.next:] {
			pl.byKey[s.key] = append(pl.byKey[s.key], s)
		}
	}
	olds := pl.byKey[key]
	if len(olds) == 0 {
		return nlSlot{}, false
	}
	pl.byKey[key] = olds[1:]
	return olds[0], true
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
