package nfevents

import (
	"sync"
	"sync/atomic"
)

// Op memory that is used again. An iptables-nft sync of a large cluster
// notifies tens of thousands of rule messages (kube-proxy rewrites its
// entry chains), which an event carries as that many Ops and copies of
// their attributes: megabytes per commit, garbage as soon as the reader
// has patched its chains (see BENCHMARKS.md, "Live: the agent beside
// kube-proxy (issue 16)", for the heap profiles). An event's ops and
// attribute bytes are therefore carved from an opMem, which the consumer
// hands back with Event.Release once it keeps none of them (the contract:
// doc.go); the watcher fills it again for a later transaction. An event
// nobody releases is collected like any value.

// opBlock is the largest block Data is carved from; the first is
// opBlockMin and each next one twice the last, so a small transaction (an
// nftables-mode sync of one endpoint: a few hundred bytes) costs no more
// than a copy per message would.
const (
	opBlock    = 256 << 10
	opBlockMin = 1 << 10
)

// Released memory is kept per table (opPool): each table's transactions
// fill again what that table's last one filled. An iptables-nft sync is
// two transactions per family (filter, then nat: tens of ops, then
// thousands), and kube-proxy syncs its IPv4 and IPv6 tables apart; with
// one memory kept for all tables, the large nat transaction would find the
// small filter one's memory and allocate afresh almost every sync. reset
// trims what a transaction did not use, so a table's memory follows its
// last transaction (a rare full restore does not stay kept).

// opMem holds one transaction's ops and the bytes their Data point into.
type opMem struct {
	ops    []Op
	blocks [][]byte // filled in order; cur is the one being filled
	cur    int
	table  TableRef // the table of its transaction's first op (its pool slot)
	// use counts hand-outs and releases: odd while an event holds it. A
	// Release whose token is not the current one (a second Release of
	// the same event, or of a copy) does nothing.
	use atomic.Uint64
}

// carve copies b into the memory and returns the copy.
func (m *opMem) carve(b []byte) []byte {
	if len(b) > opBlock/4 {
		return append([]byte(nil), b...) // rare: a block of its own
	}
	for m.cur < len(m.blocks) && cap(m.blocks[m.cur])-len(m.blocks[m.cur]) < len(b) {
		m.cur++
	}
	if m.cur == len(m.blocks) {
		size := opBlockMin
		if n := len(m.blocks); n > 0 {
			size = min(opBlock, 2*cap(m.blocks[n-1]))
		}
		m.blocks = append(m.blocks, make([]byte, 0, max(size, len(b))))
	}
	blk := m.blocks[m.cur]
	n := len(blk)
	blk = append(blk, b...)
	m.blocks[m.cur] = blk
	return blk[n:len(blk):len(blk)]
}

// reset empties the memory for another transaction, keeping the capacity
// this one used: blocks past the last one filled, and an op list over four
// times longer than it needed, are let go.
func (m *opMem) reset() {
	clear(m.ops) // drop the Data references, and the strings
	if used := len(m.ops); cap(m.ops) > 4*max(used, 16) {
		m.ops = nil
	} else {
		m.ops = m.ops[:0]
	}
	if m.cur+1 < len(m.blocks) {
		clear(m.blocks[m.cur+1:])
		m.blocks = m.blocks[:m.cur+1]
	}
	for i := range m.blocks {
		m.blocks[i] = m.blocks[i][:0]
	}
	m.cur = 0
}

// opPool is a watcher's released opMems, one per table (at most one per
// Options.OpTables entry).
type opPool struct {
	mu   sync.Mutex
	kept map[TableRef]*opMem
}

func newOpPool() *opPool { return &opPool{kept: map[TableRef]*opMem{}} }

// take returns an empty opMem for a transaction beginning in table t, and
// the token its Release must present.
func (p *opPool) take(t TableRef) (*opMem, uint64) {
	p.mu.Lock()
	m := p.kept[t]
	delete(p.kept, t)
	p.mu.Unlock()
	if m == nil {
		m = &opMem{table: t}
	}
	return m, m.use.Add(1)
}

// give puts back an opMem taken with token t, unless it was given back
// already; it replaces one its table kept (two of the table's transactions
// were in flight at once: the other is collected).
func (p *opPool) give(m *opMem, t uint64) {
	if m == nil || !m.use.CompareAndSwap(t, t+1) {
		return
	}
	m.reset()
	p.mu.Lock()
	p.kept[m.table] = m
	p.mu.Unlock()
}

// Release hands the memory of the event's Ops (and their Data) back to
// the watcher, which fills it again for a later transaction. Only the
// reader the event was applied to calls it, once it keeps none of them
// (the contract: the package comment, doc.go). Ops is nil afterwards in
// this copy of the event. Releasing twice, or an event without ops, does
// nothing.
func (ev *Event) Release() {
	if ev.mem == nil {
		return
	}
	ev.pool.give(ev.mem, ev.memToken)
	ev.mem, ev.Ops = nil, nil
}
