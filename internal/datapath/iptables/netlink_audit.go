package iptables

import "time"

// The audit: chains patched from rule messages (netlink_ops.go) are read
// again in full now and then, and compared rule by rule (handle and
// content key) with what the patches gave. A difference is counted
// (NFTStats.AuditDiffs); the full read replaces the tables either way.

const defaultAuditEvery = 10 * time.Minute

// auditDue reports whether patched tables are due for an audit read.
func (n *NFTReader) auditDue() bool {
	every := n.AuditEvery
	if every == 0 {
		every = defaultAuditEvery
	}
	due := n.auditNow || n.patched && every > 0 && time.Since(n.lastFull) >= every
	return due && n.auditBackoff.Ready(time.Now())
}

// RequestAudit makes the next Snapshot an audit read (the agent's full
// audit): everything read again and compared with the tables kept, which
// stay in use if commits keep interrupting the read (deferAudit). False
// when nothing is cached: the next Snapshot reads everything anyway.
func (n *NFTReader) RequestAudit() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fams == nil {
		return false
	}
	n.auditNow = true
	return true
}

// deferAudit gives up an audit whose every attempt a commit interrupted:
// the patched tables (prev, at the reader's generation) stay, the change
// events keep them current as before, and the audit is tried again later
// (nfevents.AuditBackoff: 30 s, doubling up to 5 minutes while commits keep
// interrupting it). Dropping them instead would turn an optional check into
// a full read the node's commits may keep interrupting, each failure
// costing an iptables-save of the whole table (Mode's fallback).
func (n *NFTReader) deferAudit(prev []*nlFamily) {
	n.fams = prev
	n.stats.AuditsDeferred++
	n.auditBackoff.PutOff(time.Now())
}

// audited compares the tables before a full read (generation gen) with the
// ones it read.
func (n *NFTReader) audited(prev []*nlFamily, gen uint32) {
	n.stats.Audits++
	n.auditBackoff.Done()
	if n.gen == gen && !sameFamilies(prev, n.fams) {
		n.stats.AuditDiffs++
	}
}

func sameFamilies(a, b []*nlFamily) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		for _, t := range nlTables {
			if !sameNLTable(a[i].tables[t], b[i].tables[t]) {
				return false
			}
		}
	}
	return true
}

// sameNLTable compares two tables' chains by handle and rules by handle
// and key.
func sameNLTable(a, b *ipTable) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	if a == nil {
		return true
	}
	if len(a.chains) != len(b.chains) {
		return false
	}
	for name, ca := range a.chains {
		cb := b.chains[name]
		if cb == nil || ca.handle != cb.handle || len(ca.nl) != len(cb.nl) {
			return false
		}
		for i := range ca.nl {
			if ca.nl[i].handle != cb.nl[i].handle || ca.nl[i].key != cb.nl[i].key {
				return false
			}
		}
	}
	return true
}
