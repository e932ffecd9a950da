package nftables

// Sets and elements of the message path (live_ops.go): the reader's
// verdict maps and cluster-ips patched element by element; the anonymous
// sets a transaction creates with the rules that use them ("numgen ... vmap
// { ... }"), kept for that transaction only (a rule keeps their reduced
// content; the kernel reuses their names); every other named set left
// aside, as the re-read path does.

import (
	"maps"
	"net/netip"
	"strings"

	"github.com/google/nftables"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
)

// opMap is one of the reader's maps as the messages leave it.
type opMap struct {
	present bool
	order   []string // keys in the order first seen
	byKey   map[string]nftElem
}

func (m *opMap) put(e nftElem) {
	k := strings.Join(e.Key, " . ")
	if _, ok := m.byKey[k]; !ok {
		m.order = append(m.order, k)
	}
	m.byKey[k] = e
}

func (m *opMap) list() []nftElem {
	out := make([]nftElem, 0, len(m.byKey))
	seen := make(map[string]bool, len(m.byKey))
	for _, k := range m.order {
		if e, ok := m.byKey[k]; ok && !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

func isAnonSet(name string) bool { return strings.HasPrefix(name, "__") }

// mapOf returns a reader map as patched so far, from the cache on first use.
func (tx *opTable) mapOf(name string) *opMap {
	if m := tx.maps[name]; m != nil {
		return m
	}
	els, present := tx.t.Maps[name]
	m := &opMap{present: present, byKey: make(map[string]nftElem, len(els))}
	for _, e := range els {
		m.put(e)
	}
	tx.maps[name] = m
	return m
}

func (tx *opTable) touchCIPs() {
	if tx.cips == nil {
		tx.cips, tx.hasCIP = maps.Clone(tx.t.ClusterIPs), tx.t.HasClusterIPSet
		if tx.cips == nil {
			tx.cips = map[netip.Addr]bool{}
		}
	}
}

// setOp applies a NEWSET or DELSET.
func (tx *opTable) setOp(op nfevents.Op) error {
	name, add := op.Set, op.Op == "new"
	switch {
	case isAnonSet(name) && add:
		tx.anon[name] = [][]byte{}
	case isAnonSet(name):
		delete(tx.anon, name)
	case isNFTReaderMap(name):
		m := tx.mapOf(name)
		if !add || !m.present { // deleted, or created (empty)
			m.present, m.order, m.byKey = add, nil, map[string]nftElem{}
		}
	case name == nftSetClusterIPs:
		tx.touchCIPs()
		if !add || !tx.hasCIP {
			tx.cips, tx.hasCIP = map[netip.Addr]bool{}, add
		}
	}
	return nil
}

// elementOp applies a NEWSETELEM or DELSETELEM.
func (tx *opTable) elementOp(op nfevents.Op) error {
	name, add := op.Set, op.Op == "new"
	switch {
	case isAnonSet(name):
		els, ok := tx.anon[name]
		if !ok || !add {
			return opsReadf("element of set %s, not created by the transaction", name)
		}
		tx.anon[name] = append(els, op.Data)
	case isNFTReaderMap(name):
		return tx.mapElementOp(op)
	case name == nftSetClusterIPs:
		tx.touchCIPs()
		els, err := tx.dec.elements(name, op.Data)
		if err != nil || !tx.hasCIP {
			return opsReadf("set %s: element: %v", name, err)
		}
		for _, el := range els {
			if a, ok := tx.conv.clusterIP(el); ok && add {
				tx.cips[a] = true
			} else if ok {
				delete(tx.cips, a)
			}
		}
	}
	return nil
}

func (tx *opTable) mapElementOp(op nfevents.Op) error {
	m := tx.mapOf(op.Set)
	els, err := tx.dec.elements(op.Set, op.Data)
	if err != nil || !m.present {
		return opsReadf("map %s: element: %v", op.Set, err)
	}
	add := op.Op == "new"
	es, err := tx.conv.mapElems(op.Set, els, add)
	if err != nil {
		return opsReadf("%v", err)
	}
	for _, e := range es {
		if add {
			m.put(e)
			tx.roots = append(tx.roots, e.Verdict.Target)
		} else {
			delete(m.byKey, strings.Join(e.Key, " . "))
		}
	}
	return nil
}

// anonElements answers the rule reduction's requests for a set's elements
// from the transaction's messages (nftNetlinkReader.sets).
func (tx *opTable) anonElements(name string) ([]nftables.SetElement, bool, error) {
	datas, ok := tx.anon[name]
	if !ok {
		return nil, false, opsReadf("set %s is not one the transaction created", name)
	}
	var out []nftables.SetElement
	for _, d := range datas {
		els, err := tx.dec.elements(name, d)
		if err != nil {
			return nil, false, opsReadf("set %s: element: %v", name, err)
		}
		out = append(out, els...)
	}
	return out, true, nil
}
