//go:build linux

package iptables

import "fmt"

// Test helpers for the external datapath_test package (drift tests that use
// internal/watch and internal/drift).
var (
	NewTestNetns   = newTestNetns
	RestoreInto    = restoreInto
	AddNFAcct      = addNFAcct
	RequireBackend = requireBackend
	ReadTestdata   = readTestdata
)

// SameCachedTables reports whether two readers hold the same chains and
// rules (handles and content keys), as the audit compares them.
func SameCachedTables(a, b *NFTReader) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	return a.fams != nil && b.fams != nil && sameFamilies(a.fams, b.fams)
}

// CachedTablesDiff names the chains and rules in which two readers' caches
// differ (for test failures).
func CachedTablesDiff(a, b *NFTReader) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := ""
	for i := range a.fams {
		for _, t := range nlTables {
			ta, tb := a.fams[i].tables[t], b.fams[i].tables[t]
			for name, ca := range ta.chains {
				cb := tb.chains[name]
				if cb == nil {
					out += fmt.Sprintf("%s %s only in patched\n", t, name)
					continue
				}
				if ca.handle != cb.handle || len(ca.nl) != len(cb.nl) {
					out += fmt.Sprintf("%s %s handle %d/%d len %d/%d\n", t, name, ca.handle, cb.handle, len(ca.nl), len(cb.nl))
					continue
				}
				for j := range ca.nl {
					if ca.nl[j] != (nlSlot{handle: cb.nl[j].handle, key: cb.nl[j].key, rule: ca.nl[j].rule}) {
						out += fmt.Sprintf("%s %s rule %d: %d/%d %x/%x\n", t, name, j, ca.nl[j].handle, cb.nl[j].handle, ca.nl[j].key, cb.nl[j].key)
					}
				}
			}
			for name := range tb.chains {
				if ta.chains[name] == nil {
					out += fmt.Sprintf("%s %s only in fresh\n", t, name)
				}
			}
		}
	}
	return out
}

// CachedGeneration is the nf_tables generation r's cache reflects.
func CachedGeneration(r *NFTReader) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// KernelGeneration reads ns's current nf_tables generation.
var KernelGeneration = currentGen

// CacheHeld names what a reader's cached tables hold beyond their chains:
// order-list entries, and handle-index entries that do not name a cached
// chain with that handle ("" when nothing: the cache holds no more than the
// kernel does).
func CacheHeld(n *NFTReader) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := ""
	for _, f := range n.fams {
		for _, name := range nlTables {
			t := f.tables[name]
			if len(t.order) > 0 {
				out += fmt.Sprintf("%s%s: an order list of %d chains\n", f.tag, name, len(t.order))
			}
			for h, c := range t.byHandle {
				if ch := t.chains[c]; ch == nil || ch.handle != h {
					out += fmt.Sprintf("%s%s: handle %d indexed for %s, which the cache does not hold with it\n", f.tag, name, h, c)
				}
			}
		}
	}
	return out
}
