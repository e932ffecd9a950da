package nfevents

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/mdlayher/netlink"
)

// nf_tables netlink constants (linux/netfilter/nf_tables.h, nfnetlink.h).
const (
	nfnlSubsysNFTables = 10
	nfnlGroupNFTables  = 7 // NFNLGRP_NFTABLES

	nftMsgNewTable     = 0
	nftMsgDelTable     = 2
	nftMsgNewChain     = 3
	nftMsgDelChain     = 5
	nftMsgNewRule      = 6
	nftMsgDelRule      = 8
	nftMsgNewSet       = 9
	nftMsgDelSet       = 11
	nftMsgNewSetElem   = 12
	nftMsgDelSetElem   = 14
	nftMsgNewGen       = 15
	nftMsgGetGen       = 16
	nftMsgNewObj       = 18
	nftMsgDelObj       = 20
	nftMsgNewFlowtable = 22
	nftMsgDelFlowtable = 24

	nftaGenID       = 1
	nftaGenProcPID  = 2
	nftaGenProcName = 3
)

// Event is one committed nftables transaction (one generation) in the
// watched network namespace. It covers kube-proxy's nftables mode and
// iptables-nft alike (their tables are nf_tables tables).
type Event struct {
	// Generation is the ruleset generation id the transaction produced.
	Generation uint32
	// PID and Process name the committing process, when the kernel says.
	PID     uint32
	Process string
	// Changes lists what the transaction touched, de-duplicated and sorted.
	Changes []Change
	// Lost is set when events were dropped before this one (socket overrun
	// or a slow reader): the receiver must re-read everything it watches.
	Lost bool
	// Received is when the watcher read the transaction's first message
	// (all of them, the generation message last, are sent at the commit).
	Received time.Time
	// Ops are the transaction's rule and chain messages of the watcher's
	// OpTables, in commit order; OpsComplete says they are all of them
	// (false after an overrun or past Options.MaxOpBytes: then use
	// Changes and read the chains again).
	Ops         []Op
	OpsComplete bool

	// The memory Ops live in, which Release hands back (mem.go).
	mem      *opMem
	memToken uint64
	pool     *opPool
}

// Change is one kind of change to one object.
type Change struct {
	Family string // "ip", "ip6", "inet", "arp", "bridge", "netdev"
	Table  string
	Object string // "table", "chain", "rule", "set", "element", "object", "flowtable"
	Name   string // chain of a rule or chain change; set of a set or element change
	Op     string // "new" or "del"
	Count  int    // how many messages of this kind the transaction carried
}

// TouchesTable reports whether the event changed something in family/table.
func (e Event) TouchesTable(family, table string) bool {
	for _, c := range e.Changes {
		if c.Family == family && c.Table == table {
			return true
		}
	}
	return false
}

// Chains returns the chains of family/table whose rules or existence changed.
func (e Event) Chains(family, table string) []string {
	return e.names(family, table, "chain", "rule")
}

// Sets returns the sets and maps of family/table whose elements or existence changed.
func (e Event) Sets(family, table string) []string {
	return e.names(family, table, "set", "element")
}

func (e Event) names(family, table string, objects ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range e.Changes {
		if c.Family != family || c.Table != table || seen[c.Name] || c.Name == "" {
			continue
		}
		for _, o := range objects {
			if c.Object == o {
				seen[c.Name] = true
				out = append(out, c.Name)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// nftFamilyName names an nfproto family as nft does.
func nftFamilyName(f uint8) string {
	switch f {
	case 1:
		return "inet"
	case 2:
		return "ip"
	case 3:
		return "arp"
	case 5:
		return "netdev"
	case 7:
		return "bridge"
	case 10:
		return "ip6"
	}
	return fmt.Sprintf("family-%d", f)
}

// nftMsgObjects maps message types to (object, op, table attr, name attr).
var nftMsgObjects = map[uint16]struct {
	object, op      string
	tableAttr, name uint16
}{
	nftMsgNewTable:     {"table", "new", 1, 0},
	nftMsgDelTable:     {"table", "del", 1, 0},
	nftMsgNewChain:     {"chain", "new", 1, 3},
	nftMsgDelChain:     {"chain", "del", 1, 3},
	nftMsgNewRule:      {"rule", "new", 1, 2},
	nftMsgDelRule:      {"rule", "del", 1, 2},
	nftMsgNewSet:       {"set", "new", 1, 2},
	nftMsgDelSet:       {"set", "del", 1, 2},
	nftMsgNewSetElem:   {"element", "new", 1, 2},
	nftMsgDelSetElem:   {"element", "del", 1, 2},
	nftMsgNewObj:       {"object", "new", 1, 2},
	nftMsgDelObj:       {"object", "del", 1, 2},
	nftMsgNewFlowtable: {"flowtable", "new", 1, 2},
	nftMsgDelFlowtable: {"flowtable", "del", 1, 2},
}

// nftGenInfo is the content of a NEWGEN message.
type nftGenInfo struct {
	ID      uint32
	PID     uint32
	Process string
}

// parseChangeMessage decodes one nf_tables notification. It returns either
// a change item, or (for NEWGEN) the generation; ok is false for messages of
// no interest. Pure: it never panics on malformed input.
func parseChangeMessage(m netlink.Message) (item Change, gen *nftGenInfo, ok bool, err error) {
	return parseChangeMessageIn(m, nil)
}

// parseChangeMessageIn is parseChangeMessage with names interned in in (a
// transaction repeats the same chain name thousands of times); nil: none.
// Object messages are scanned without allocating (rawAttrs).
func parseChangeMessageIn(m netlink.Message, in map[string]string) (item Change, gen *nftGenInfo, ok bool, err error) {
	if m.Header.Type>>8 != nfnlSubsysNFTables {
		return item, nil, false, nil
	}
	typ := uint16(m.Header.Type & 0xff)
	if len(m.Data) < 4 {
		return item, nil, false, fmt.Errorf("nf_tables message type %d: %d bytes, want the 4-byte nfgenmsg header", typ, len(m.Data))
	}
	if typ == nftMsgNewGen {
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return item, nil, false, fmt.Errorf("nf_tables message type %d: %w", typ, err)
		}
		ad.ByteOrder = binary.BigEndian
		g, err := parseGenAttrs(ad)
		return item, g, err == nil, err
	}
	spec, known := nftMsgObjects[typ]
	if !known {
		return item, nil, false, nil
	}
	item = Change{Family: nftFamilyName(m.Data[0]), Object: spec.object, Op: spec.op, Count: 1}
	err = rawAttrs(m.Data[4:], func(t uint16, v []byte) {
		switch {
		case t == spec.tableAttr:
			item.Table = internStr(in, v)
		case spec.name != 0 && t == spec.name:
			item.Name = internStr(in, v)
		}
	})
	if err != nil {
		return item, nil, false, fmt.Errorf("nf_tables %s %s: %w", spec.op, spec.object, err)
	}
	return item, nil, true, nil
}

// rawAttrs walks netlink attributes (host-order headers, 4-byte aligned)
// and hands each type (flags cleared) and value to fn.
func rawAttrs(b []byte, fn func(typ uint16, val []byte)) error {
	for len(b) > 0 {
		if len(b) < 4 {
			return fmt.Errorf("truncated attribute header")
		}
		n := int(binary.NativeEndian.Uint16(b))
		if n < 4 || n > len(b) {
			return fmt.Errorf("attribute length %d of %d bytes", n, len(b))
		}
		fn(binary.NativeEndian.Uint16(b[2:])&0x3fff, b[4:n])
		b = b[min(len(b), (n+3)&^3):]
	}
	return nil
}

// internStr is a NUL-terminated string attribute, from in when there.
func internStr(in map[string]string, v []byte) string {
	if i := bytes.IndexByte(v, 0); i >= 0 {
		v = v[:i]
	}
	if in == nil {
		return string(v)
	}
	if s, ok := in[string(v)]; ok {
		return s
	}
	s := string(v)
	in[s] = s
	return s
}

func parseGenAttrs(ad *netlink.AttributeDecoder) (*nftGenInfo, error) {
	g := &nftGenInfo{}
	for ad.Next() {
		switch ad.Type() {
		case nftaGenID:
			g.ID = ad.Uint32()
		case nftaGenProcPID:
			g.PID = ad.Uint32()
		case nftaGenProcName:
			g.Process = ad.String()
		}
	}
	if err := ad.Err(); err != nil {
		return nil, fmt.Errorf("nf_tables generation: %w", err)
	}
	return g, nil
}

// changeBatch accumulates the items of one transaction until its NEWGEN.
type changeBatch struct {
	items map[Change]int
}

func (b *changeBatch) add(it Change) {
	if b.items == nil {
		b.items = map[Change]int{}
	}
	it.Count = 0
	b.items[it]++
}

// flush returns the batch as a sorted list and empties it.
func (b *changeBatch) flush() []Change {
	out := make([]Change, 0, len(b.items))
	for it, n := range b.items {
		it.Count = n
		out = append(out, it)
	}
	b.items = nil
	sort.Slice(out, func(i, j int) bool {
		a, c := out[i], out[j]
		if a.Family+" "+a.Table != c.Family+" "+c.Table {
			return a.Family+" "+a.Table < c.Family+" "+c.Table
		}
		if a.Object != c.Object {
			return a.Object < c.Object
		}
		if a.Name != c.Name {
			return a.Name < c.Name
		}
		return a.Op < c.Op
	})
	return out
}
