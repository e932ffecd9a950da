package iptables

import (
	"slices"
	"testing"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
)

// opsChain is a cached chain with rules of the given handles (keys = handles).
func opsChain(handles ...uint64) (*ipTable, *ipChain) {
	c := &ipChain{name: "KUBE-X", handle: 100}
	for _, h := range handles {
		c.nl = append(c.nl, nlSlot{handle: h, key: h})
	}
	t := &ipTable{name: "nat", chains: map[string]*ipChain{"KUBE-X": c, "KUBE-Y": {name: "KUBE-Y", handle: 200}}}
	return t, c
}

func newRule(h, pos uint64, app bool) nfevents.Op {
	return nfevents.Op{Object: "rule", Op: "new", Chain: "KUBE-X", Handle: h, Position: pos, Append: app, Data: []byte{0}}
}

func delRule(h uint64) nfevents.Op {
	return nfevents.Op{Object: "rule", Op: "del", Chain: "KUBE-X", Handle: h}
}

// runOps applies ops and returns the handles in order, or the result that stopped it.
func runOps(t *testing.T, ops []nfevents.Op, handles ...uint64) ([]uint64, patchResult) {
	t.Helper()
	tb, c := opsChain(handles...)
	p := newChainPatch(c)
	co := chainOps{all: ops}
	for i := range ops {
		co.idx = append(co.idx, int32(i))
	}
	for i := range ops {
		if r := p.apply(co, i, tb); r != patchDone {
			return nil, r
		}
	}
	var out []uint64
	for i := p.head; i >= 0; i = p.nodes[i].next {
		out = append(out, p.nodes[i].s.handle)
	}
	return out, patchDone
}

// TestChainPatchPlacement: where the kernel's messages put a rule, and
// the cases they do not decide (read the chain again).
func TestChainPatchPlacement(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  []uint64
		ops  []nfevents.Op
		want []uint64 // nil: not understood
		res  patchResult
	}{
		{"flush and re-add", []uint64{1, 2, 3}, []nfevents.Op{delRule(1), delRule(2), delRule(3), newRule(4, 0, true), newRule(5, 4, true), newRule(6, 0, true)}, []uint64{4, 5, 6}, patchDone},
		{"append", []uint64{1, 2}, []nfevents.Op{newRule(3, 0, true)}, []uint64{1, 2, 3}, patchDone},
		{"insert at head", []uint64{1, 2}, []nfevents.Op{newRule(3, 0, false)}, []uint64{3, 1, 2}, patchDone},
		{"insert after a position", []uint64{1, 2}, []nfevents.Op{newRule(3, 1, false)}, []uint64{1, 3, 2}, patchDone},
		{"replace keeping the handle, head", []uint64{1, 2, 3}, []nfevents.Op{delRule(1), newRule(1, 0, true)}, []uint64{1, 2, 3}, patchDone},
		{"replace keeping the handle, tail", []uint64{1, 2, 3}, []nfevents.Op{delRule(3), newRule(3, 0, true)}, []uint64{1, 2, 3}, patchDone},
		{"replace keeping the handle, middle", []uint64{1, 2, 3}, []nfevents.Op{delRule(2), newRule(2, 1, true)}, []uint64{1, 2, 3}, patchDone},
		{"replace of the head, new handle", []uint64{1, 2, 3}, []nfevents.Op{delRule(1), newRule(4, 0, true)}, nil, patchRead},
		{"replace of the head, new rule notified first", []uint64{1, 2, 3}, []nfevents.Op{newRule(4, 0, true), delRule(1)}, nil, patchRead},
		{"position names a rule not notified yet", []uint64{1}, []nfevents.Op{newRule(3, 4, false), newRule(4, 0, false)}, nil, patchRead},
		{"unknown handle deleted", []uint64{1}, []nfevents.Op{delRule(7)}, nil, patchRead},
		{"handle added twice", []uint64{1}, []nfevents.Op{newRule(1, 0, true)}, nil, patchRead},
		{"rename onto this chain", nil, []nfevents.Op{{Object: "chain", Op: "del", Chain: "KUBE-X", Handle: 100}, {Object: "chain", Op: "new", Chain: "KUBE-X", Handle: 200}}, nil, patchTable},
		{"deleted and created again", []uint64{1}, []nfevents.Op{delRule(1), {Object: "chain", Op: "del", Chain: "KUBE-X", Handle: 100},
			{Object: "chain", Op: "new", Chain: "KUBE-X", Handle: 300}, newRule(9, 0, true)}, []uint64{9}, patchDone},
		{"rule after the chain's deletion", []uint64{}, []nfevents.Op{{Object: "chain", Op: "del", Chain: "KUBE-X", Handle: 100}, newRule(9, 0, true)}, nil, patchRead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, res := runOps(t, tc.ops, tc.old...)
			if res != tc.res || !slices.Equal(got, tc.want) {
				t.Errorf("got %v (%d), want %v (%d)", got, res, tc.want, tc.res)
			}
		})
	}
}

// TestNLRuleKeyIgnoresCounters: two messages that differ only in a
// counter's values have one key; any other byte changes it.
func TestNLRuleKeyIgnoresCounters(t *testing.T) {
	attr := func(typ uint16, data []byte) []byte {
		n := 4 + len(data)
		b := []byte{byte(n), byte(n >> 8), byte(typ), byte(typ >> 8)}
		b = append(b, data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	elem := func(name string, data []byte) []byte {
		return attr(nftaListElem, append(attr(nftaExprName, []byte(name+"\x00")), attr(nftaExprData, data)...))
	}
	rule := func(packets byte, cmp byte) []byte {
		return append(elem("counter", []byte{0, 0, 0, packets}), elem("cmp", []byte{1, 2, 3, cmp})...)
	}
	if nlRuleKey(rule(1, 7), nil) != nlRuleKey(rule(9, 7), nil) {
		t.Error("counter values change the key")
	}
	if nlRuleKey(rule(1, 7), nil) == nlRuleKey(rule(1, 8), nil) {
		t.Error("a cmp value does not change the key")
	}
	if nlRuleKey(rule(1, 7), []byte("a")) == nlRuleKey(rule(1, 7), []byte("b")) {
		t.Error("user data does not change the key")
	}
	msg := append(attr(nftaRuleChain, []byte("KUBE-X\x00")), append(attr(nftaRuleExpressions, rule(3, 7)), attr(nftaRuleUserdata, []byte("c"))...)...)
	if k, ok := nlMsgKey(msg); !ok || k != nlRuleKey(rule(5, 7), []byte("c")) {
		t.Error("nlMsgKey differs from nlRuleKey of the same parts")
	}
}

// TestRulePool: old rules are handed out by key, each once, in order or not.
func TestRulePool(t *testing.T) {
	r := []*ipRule{{text: "a"}, {text: "b"}, {text: "a2"}, {text: "c"}}
	old := &ipChain{nl: []nlSlot{{key: 1, rule: r[0]}, {key: 2, rule: r[1]}, {key: 1, rule: r[2]}, {key: 3, rule: r[3]}}}
	pl := rulePool{old: old}
	var got []string
	for _, k := range []uint64{1, 2, 3, 1, 1, 9} {
		if s, ok := pl.take(k); ok {
			got = append(got, s.rule.text)
		} else {
			got = append(got, "-")
		}
	}
	if want := []string{"a", "b", "c", "a2", "-", "-"}; !slices.Equal(got, want) {
		t.Errorf("took %v, want %v", got, want)
	}
	if _, ok := (&rulePool{}).take(1); ok {
		t.Error("a chain that did not exist has no old rules")
	}
}

// TestChainByHandle: the handle index answers as a walk of the chains
// would, after chains are replaced, re-handled and deleted behind it.
func TestChainByHandle(t *testing.T) {
	tb, _ := opsChain(1, 2)
	if n := tb.chainByHandle(200); n != "KUBE-Y" {
		t.Fatalf("handle 200: %q, want KUBE-Y", n)
	}
	if !tb.otherChainHandle("KUBE-Z", 100) || tb.otherChainHandle("KUBE-X", 100) {
		t.Error("handle 100 is KUBE-X's: other for KUBE-Z, not for KUBE-X")
	}
	tb.setChain(&ipChain{name: "KUBE-Z", handle: 300}) // created after the index
	if n := tb.chainByHandle(300); n != "KUBE-Z" {
		t.Errorf("handle 300 after setChain: %q, want KUBE-Z", n)
	}
	delete(tb.chains, "KUBE-Y") // gone without a note
	if n := tb.chainByHandle(200); n != "" {
		t.Errorf("handle 200 after KUBE-Y's deletion: %q, want none", n)
	}
	tb.chains["KUBE-X"].handle = 400 // re-handled: the old handle is no one's
	tb.noteHandle("KUBE-X", 400)
	if a, b := tb.chainByHandle(100), tb.chainByHandle(400); a != "" || b != "KUBE-X" {
		t.Errorf("after KUBE-X took handle 400: 100 -> %q, 400 -> %q; want none, KUBE-X", a, b)
	}
	for h := uint64(1); h <= 500; h++ { // against a walk, for every handle
		want := ""
		for n, c := range tb.chains {
			if c.handle == h {
				want = n
			}
		}
		if got := tb.chainByHandle(h); got != want {
			t.Errorf("handle %d: index %q, walk %q", h, got, want)
		}
	}
}
