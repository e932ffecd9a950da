package iptables

import (
	"slices"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
)

// Patching cached chains from the rule messages of a change event, instead
// of dumping them again (NFTReader.ApplyEvent). A kube-proxy sync rewrites
// nat KUBE-SERVICES and the filter entry chains on every run: the kernel
// notifies DELRULE for every old rule and NEWRULE for every rule added
// again, most of them identical. A rule whose content key (netlink_key.go)
// matches a rule the chain held keeps that rule's parse: nothing is
// decoded; a chain whose rules come out the same is not re-walked at all.
//
// Placement follows the kernel's notification (nf_tables_rule_notify): a
// NEWRULE carries the handle of the rule before it at commit time
// (NFTA_RULE_POSITION), or none when the rule is first or last in the chain
// then; NLM_F_APPEND when the request appended or replaced. Without a
// position the rule is put first or last, as the request flags and its
// neighbours in the transaction say; where they do not decide (a rule
// replaced at the head of a chain on kernels that give it a new handle, a
// position naming a rule not notified yet), the chain is read again.
// Anything else not understood (an unknown handle, a rule in an unknown or
// opaque chain, a rule that does not decode) reads the chain again too; a
// rename (a chain message with another chain's handle) reads the table.

type patchResult uint8

const (
	patchRead  patchResult = iota // not understood: read the chain again
	patchDone                     // the chain was patched, its rules changed
	patchSame                     // patched, the same rules as the last read
	patchTable                    // read the whole table again
)

type opChain struct {
	fam          *nlFamily
	table, chain string
}

// chainOps is one chain's ops of an event, in commit order: indexes into
// the event's Ops (which nothing copies).
type chainOps struct {
	all []nfevents.Op
	idx []int32
}

func (c chainOps) len() int              { return len(c.idx) }
func (c chainOps) at(i int) *nfevents.Op { return &c.all[c.idx[i]] }

// prev and next are the ops before and after op i of the chain (nil: none).
func (c chainOps) prev(i int) *nfevents.Op {
	if i == 0 {
		return nil
	}
	return c.at(i - 1)
}

func (c chainOps) next(i int) *nfevents.Op {
	if i+1 >= c.len() {
		return nil
	}
	return c.at(i + 1)
}

// opsByChain groups a usable event's ops per chain, in commit order; nil
// when the ops cannot be used (incomplete, or not newer than the cache:
// a full read may already hold them).
func (n *NFTReader) opsByChain(ev nfevents.Event) map[opChain]chainOps {
	if !ev.OpsComplete || len(ev.Ops) == 0 || int32(ev.Generation-n.gen) <= 0 {
		return nil
	}
	// Two passes, one index array carved per chain and used again by the
	// next event: a large sync carries tens of thousands of ops, and a
	// slice grown per chain would be a large share of what the agent
	// allocates under iptables-nft churn.
	count := map[opChain]int{}
	for i := range ev.Ops {
		if k, ok := n.opKey(&ev.Ops[i]); ok {
			count[k]++
		}
	}
	if cap(n.opsIdx) < len(ev.Ops) {
		n.opsIdx = make([]int32, 0, len(ev.Ops))
	}
	all := n.opsIdx[:0]
	out := make(map[opChain]chainOps, len(count))
	for k, c := range count {
		out[k] = chainOps{ev.Ops, all[len(all) : len(all) : len(all)+c]}
		all = all[:len(all)+c]
	}
	for i := range ev.Ops {
		if k, ok := n.opKey(&ev.Ops[i]); ok {
			c := out[k]
			c.idx = append(c.idx, int32(i)) // within its carved capacity
			out[k] = c
		}
	}
	return out
}

// opKey is the cached chain a rule or chain op is for; false for tables
// not kept and for other objects.
func (n *NFTReader) opKey(op *nfevents.Op) (opChain, bool) {
	if op.Object != "rule" && op.Object != "chain" {
		return opChain{}, false
	}
	f := n.family(op.Family)
	if f == nil || (op.Table != "nat" && op.Table != "filter") {
		return opChain{}, false
	}
	return opChain{f, op.Table, op.Chain}, true
}

// patchChain applies one chain's ops to the cached table.
func (n *NFTReader) patchChain(f *nlFamily, table, name string, ops chainOps) patchResult {
	t := f.tables[table]
	if t == nil {
		return patchRead
	}
	if _, opaque := f.opaque[table][name]; opaque {
		return patchRead
	}
	old := t.chains[name]
	if old != nil && len(old.nl) < len(old.rules) {
		return patchRead // not read over netlink
	}
	p := n.patchBuf.reset(old)
	defer p.release()
	for i := range ops.len() {
		if r := p.apply(ops, i, t); r != patchDone {
			return r
		}
	}
	return p.install(f.v6, t, name, n)
}

// patchNode is one rule of a chain being patched, in a linked list.
type patchNode struct {
	s          nlSlot
	data       []byte // a new rule's message (decoded once placed)
	prev, next int32
}

type chainPatch struct {
	old        *ipChain
	nodes      []patchNode
	at         map[uint64]int32 // live rules by handle
	head, tail int32
	exists     bool
	handle     uint64
	delHead    bool // the last rule deleted was first in the chain
	delTail    bool // ... last
}

func newChainPatch(old *ipChain) *chainPatch { return new(chainPatch).reset(old) }

// reset makes p a patch of old (nil: a chain not cached), keeping the
// capacity of its node list and handle index.
func (p *chainPatch) reset(old *ipChain) *chainPatch {
	nodes, at := p.nodes[:0], p.at
	if at == nil {
		at = map[uint64]int32{}
	}
	*p = chainPatch{old: old, head: -1, tail: -1, nodes: nodes, at: at}
	if old == nil {
		return p
	}
	p.exists, p.handle = true, old.handle
	p.nodes = slices.Grow(p.nodes, 2*len(old.nl)+4) // a flushed chain written again doubles its list
	for _, s := range old.nl {
		p.link(p.tail, patchNode{s: s})
	}
	return p
}

// release drops what the patch points to (rules, message bytes), keeping
// its capacity for the next one.
func (p *chainPatch) release() {
	p.forgetHandles()
	clear(p.nodes)
	p.old = nil
}

// forgetHandles empties the handle index key by key: every key came from a
// node. clear(p.at) costs the map's capacity, which the largest chain
// (KUBE-SERVICES) sets, and a sync patches every chain kube-proxy declares
// (about one per endpoint), nearly all of a rule or two.
func (p *chainPatch) forgetHandles() {
	for i := range p.nodes {
		delete(p.at, p.nodes[i].s.handle)
	}
}

// link inserts a node after the node at index after (-1: at the head).
func (p *chainPatch) link(after int32, nd patchNode) {
	i := int32(len(p.nodes))
	nd.prev, nd.next = after, p.head
	if after >= 0 {
		nd.next = p.nodes[after].next
		p.nodes[after].next = i
	} else {
		p.head = i
	}
	if nd.next >= 0 {
		p.nodes[nd.next].prev = i
	} else {
		p.tail = i
	}
	p.nodes = append(p.nodes, nd)
	p.at[nd.s.handle] = i
}

// unlink removes the rule with handle h; false if the chain has none.
func (p *chainPatch) unlink(h uint64) bool {
	i, ok := p.at[h]
	if !ok {
		return false
	}
	nd := p.nodes[i]
	p.delHead, p.delTail = nd.prev < 0, nd.next < 0
	if nd.prev >= 0 {
		p.nodes[nd.prev].next = nd.next
	} else {
		p.head = nd.next
	}
	if nd.next >= 0 {
		p.nodes[nd.next].prev = nd.prev
	} else {
		p.tail = nd.prev
	}
	delete(p.at, h)
	return true
}

// apply applies ops[i].
func (p *chainPatch) apply(ops chainOps, i int, t *ipTable) patchResult {
	op := ops.at(i)
	switch {
	case op.Object == "chain" && op.Op == "new":
		if !p.exists && t.otherChainHandle(op.Chain, op.Handle) {
			return patchTable // a rename: the old name is gone without a message
		}
		if p.exists && p.handle != 0 && p.handle != op.Handle {
			return patchTable
		}
		p.exists, p.handle = true, op.Handle
	case op.Object == "chain" && op.Op == "del":
		if p.exists && p.handle != 0 && p.handle != op.Handle {
			return patchTable
		}
		p.exists, p.head, p.tail = false, -1, -1
		p.forgetHandles()
	case op.Object != "rule" || !p.exists:
		return patchRead
	case op.Op == "del":
		if !p.unlink(op.Handle) {
			return patchRead
		}
	case op.Op == "new":
		after, ok := p.place(ops, i)
		if !ok || len(op.Data) == 0 {
			return patchRead
		}
		p.link(after, patchNode{s: nlSlot{handle: op.Handle}, data: op.Data})
	default:
		return patchRead
	}
	return patchDone
}

// place says where the new rule ops[i] goes: after the node at the index
// returned (-1: at the head); false when the messages do not tell.
func (p *chainPatch) place(ops chainOps, i int) (int32, bool) {
	op := ops.at(i)
	if _, dup := p.at[op.Handle]; dup {
		return 0, false
	}
	if op.Position != 0 {
		j, ok := p.at[op.Position]
		return j, ok
	}
	if p.head < 0 {
		return -1, true
	}
	if prev := ops.prev(i); prev != nil && prev.Object == "rule" && prev.Op == "del" {
		if prev.Handle == op.Handle { // replaced in place, same handle
			switch {
			case p.delHead:
				return -1, true
			case p.delTail:
				return p.tail, true
			}
			return 0, false
		}
		if op.Append && p.delHead {
			return 0, false // maybe the first rule replaced (new handle): first or last?
		}
	}
	if !op.Append {
		return -1, true // inserted without a position: at the head
	}
	if next := ops.next(i); next != nil && next.Object == "rule" && next.Op == "del" && next.Handle == p.nodes[p.head].s.handle {
		return 0, false // a replace of the first rule, new rule notified first
	}
	return p.tail, true
}

// otherChainHandle reports whether a chain other than name has handle h.
func (t *ipTable) otherChainHandle(name string, h uint64) bool {
	n := t.chainByHandle(h)
	return n != "" && n != name
}

// chainByHandle names the chain with handle h ("" none) from an index built
// on first use: a sync's messages name every chain kube-proxy declares, and
// a walk of all chains for each (thousands of chains) would be a large
// share of the agent's CPU under churn. An entry whose chain is gone or has another handle now
// is dropped; a chain that takes a handle is noted (setChain, noteHandle).
// The kernel never hands a table's handle out twice.
func (t *ipTable) chainByHandle(h uint64) string {
	if t.byHandle == nil {
		t.byHandle = make(map[uint64]string, len(t.chains))
		for n, c := range t.chains {
			if c.handle != 0 {
				t.byHandle[c.handle] = n
			}
		}
	}
	n, ok := t.byHandle[h]
	if !ok {
		return ""
	}
	if c := t.chains[n]; c == nil || c.handle != h {
		delete(t.byHandle, h)
		return ""
	}
	return n
}

// noteHandle records that chain name now has handle h (index built only).
func (t *ipTable) noteHandle(name string, h uint64) {
	if t.byHandle != nil && h != 0 {
		t.byHandle[h] = name
	}
}

// setChain caches a chain read or patched over netlink, keeping the index:
// the handle of the chain it replaces leaves it.
func (t *ipTable) setChain(c *ipChain) {
	if old := t.chains[c.name]; old != nil && old != c {
		t.unindex(old, c.handle)
	}
	t.chains[c.name] = c
	t.noteHandle(c.name, c.handle)
}

// dropChain removes a chain the kernel no longer holds.
func (t *ipTable) dropChain(name string) {
	if old := t.chains[name]; old != nil {
		t.unindex(old, 0)
		delete(t.chains, name)
	}
}

// unindex drops a replaced or deleted chain's handle from the index unless
// its successor keeps it: the kernel never hands a handle out again, so
// nothing would ever ask for it, and under churn (a chain per endpoint
// created and deleted) the index would grow without end. (Netlink tables
// keep no order list, so a replaced chain needs no dead mark.)
func (t *ipTable) unindex(old *ipChain, successor uint64) {
	if t.byHandle != nil && old.handle != 0 && old.handle != successor && t.byHandle[old.handle] == old.name {
		delete(t.byHandle, old.handle)
	}
}
