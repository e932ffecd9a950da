package nfevents

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
)

// Rule, chain, set and element messages carried with an event
// (Options.OpTables): the kernel's NEWRULE/DELRULE/NEWCHAIN/DELCHAIN
// and NEWSET/DELSET/NEWSETELEM/DELSETELEM notifications of a transaction,
// in the order it committed them, so a reader that keeps the rules and maps
// of those tables can patch them instead of dumping what the event names
// again.
//
// Kernel format (net/netfilter/nf_tables_api.c, nf_tables_fill_rule_info):
// a rule notification holds NFTA_RULE_TABLE, _CHAIN, _HANDLE, for NEWRULE
// NFTA_RULE_POSITION (the handle of the rule before it in the chain at
// commit time, absent when the rule is first or last there), then the
// expressions and user data exactly as a GETRULE dump gives them. The
// header carries NLM_F_APPEND when the request appended or replaced. A set
// notification holds NFTA_SET_TABLE, _NAME, _FLAGS..., an element
// notification NFTA_SET_ELEM_LIST_TABLE, _SET and the elements (one per
// message as the kernel commits them), as a GETSET / GETSETELEM dump gives
// them; an anonymous set ("__map%d") is notified before its elements and
// the rule that uses it.

// TableRef names one nf_tables table.
type TableRef struct{ Family, Table string }

// Op is one rule, chain, set or element notification of a transaction.
// Both nf_tables-backed readers take it as it is: the nftables reader
// patches its tables and maps, the iptables-nft netlink reader its chains
// (it ignores set and element ops). An Op's Data lives in memory the
// watcher uses again once the event is released (mem.go).
type Op struct {
	Family, Table, Chain string // Chain: rule and chain ops only
	Set                  string // set and element ops: the set's name
	Object               string // "rule", "chain", "set" or "element"
	Op                   string // "new" or "del"
	Handle               uint64 // the rule's handle (a chain's handle for chain ops)
	Position             uint64 // NEWRULE: handle of the rule before it; 0 none
	Append               bool   // NLM_F_APPEND in the notification header
	// Data is a NEWRULE, NEWSET, NEWSETELEM or DELSETELEM message's
	// attributes (after the nfgenmsg header), copied: what a GETRULE,
	// GETSET or GETSETELEM dump gives.
	Data []byte
}

const (
	nftaRuleHandle   = 3
	nftaRulePosition = 6
	nftaChainHandle  = 2
	nlmFAppend       = 0x800 // NLM_F_APPEND
)

// DefaultMaxOpBytes bounds the rule bytes one event carries (Options.MaxOpBytes).
const DefaultMaxOpBytes = 32 << 20

// opsBatch collects the ops of one transaction.
type opsBatch struct {
	ops      []Op
	bytes    int
	overflow bool
	first    TableRef // the table of the first op
	mem      *opMem   // where ops and their Data live (mem.go)
	token    uint64   // mem's hand-out token
}

// reset starts a new transaction. The batch's memory goes back to the
// pool unless an event took it (handOver).
func (b *opsBatch) reset(p *opPool) {
	p.give(b.mem, b.token)
	*b = opsBatch{}
}

// handOver gives the batch's ops and memory to ev.
func (b *opsBatch) handOver(ev *Event, p *opPool) {
	ev.Ops, ev.OpsComplete = b.ops, !b.overflow
	if b.mem != nil {
		b.mem.ops = b.ops // keep a grown array for the next use
		ev.mem, ev.memToken, ev.pool = b.mem, b.token, p
		b.mem = nil
	}
}

// wantOps reports whether the watcher carries ops of family/table.
func (w *Watcher) wantOps(family, table string) bool {
	for _, t := range w.opTables {
		if t.Family == family && t.Table == table {
			return true
		}
	}
	return false
}

// addOp keeps a rule, chain, set or element message of a carried table.
func (w *Watcher) addOp(m netlink.Message, it Change) {
	if !opObject(it.Object) || !w.wantOps(it.Family, it.Table) {
		return
	}
	b := &w.opsB
	if b.overflow {
		return
	}
	if b.mem == nil {
		b.mem, b.token = w.pool.take(TableRef{Family: it.Family, Table: it.Table})
	}
	op, err := parseOp(m, it, b.mem.carve)
	if err == nil {
		b.bytes += len(op.Data) + 64
	}
	if err != nil || b.bytes > w.maxOpBytes {
		// Not understood, or too large: the event carries no ops.
		b.reset(w.pool)
		b.overflow = true
		return
	}
	if b.ops == nil {
		// As many as the last transaction that began in this table carried:
		// kube-proxy's syncs are alike (an iptables-nft sync commits nat
		// and filter apart, thousands of ops against tens), and growing a
		// slice of thousands of ops by doubling is garbage.
		b.first = TableRef{Family: it.Family, Table: it.Table}
		if n := max(w.opsHint[b.first], 16); cap(b.mem.ops) < n {
			b.mem.ops = make([]Op, 0, n)
		}
		b.ops = b.mem.ops[:0]
	}
	b.ops = append(b.ops, op)
}

func opObject(o string) bool { return o == "rule" || o == "chain" || o == "set" || o == "element" }

// parseOp reads handle and position of a rule or chain message whose item
// parseChangeMessage already gave, and keeps what a reader needs of the
// others. Pure.
//
// keep copies the attributes an Op keeps (nil: a copy of their own).
func parseOp(m netlink.Message, it Change, keep func([]byte) []byte) (Op, error) {
	if keep == nil {
		keep = cloneBytes
	}
	op := Op{Family: it.Family, Table: it.Table, Chain: it.Name, Object: it.Object, Op: it.Op,
		Append: m.Header.Flags&nlmFAppend != 0}
	if len(m.Data) < 4 {
		return op, fmt.Errorf("short message")
	}
	if it.Object == "set" || it.Object == "element" {
		return parseSetOp(m, op, keep)
	}
	handleAttr := uint16(nftaRuleHandle)
	if it.Object == "chain" {
		handleAttr = nftaChainHandle
	}
	err := rawAttrs(m.Data[4:], func(t uint16, v []byte) {
		switch {
		case len(v) != 8:
		case t == handleAttr:
			op.Handle = binary.BigEndian.Uint64(v)
		case it.Object == "rule" && t == nftaRulePosition:
			op.Position = binary.BigEndian.Uint64(v)
		}
	})
	if err != nil {
		return op, err
	}
	if op.Handle == 0 || op.Chain == "" {
		return op, fmt.Errorf("%s %s without handle or chain", it.Op, it.Object)
	}
	if it.Object == "rule" && it.Op == "new" {
		op.Data = keep(m.Data[4:])
	}
	return op, nil
}

func cloneBytes(b []byte) []byte { return append([]byte(nil), b...) }

// parseSetOp keeps a set or element message: the set's name and, but for
// DELSET, the attributes.
func parseSetOp(m netlink.Message, op Op, keep func([]byte) []byte) (Op, error) {
	op.Set, op.Chain = op.Chain, ""
	if op.Set == "" {
		return op, fmt.Errorf("%s %s without a set name", op.Op, op.Object)
	}
	if op.Object == "element" || op.Op == "new" {
		op.Data = keep(m.Data[4:])
	}
	return op, nil
}
