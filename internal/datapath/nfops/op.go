// Package nfops holds the one type both nf_tables-backed readers share:
// a rule, chain, set or element notification of a committed transaction.
// The change watcher (datapath/nftables) produces it and the iptables-nft
// netlink reader (datapath/iptables) consumes it as it is, without either
// reader package importing the other and without a per-event conversion
// (a sync at 100k endpoints carries ~20,000 of them).
package nfops

// Op is one rule, chain, set or element notification of a transaction.
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
