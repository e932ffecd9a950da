// Package nfevents is the nf_tables change feed of one network namespace:
// a Watcher that follows the kernel's nf_tables notifications (netlink
// group NFNLGRP_NFTABLES) and delivers one Event per committed transaction,
// for kube-proxy's nftables mode and iptables-nft alike (both write
// nf_tables tables). It only listens and asks (GETGEN, GETCHAIN): it never
// changes kernel state.
//
// The feed has many consumers and imports none of them: the agent's loop
// (an event triggers and dates a read), the nftables reader and the
// iptables-nft netlink reader (both patch what they keep from an event's
// Ops), and the datapath contract, whose ChangeEvent is Event. Readers
// import this package; this package imports no reader.
//
// An Event names what its transaction touched (Changes) and, for the tables
// the watcher was asked to carry (Options.OpTables), holds the
// transaction's rule, chain, set and element messages (Ops). Events are
// hints (docs/architecture.md, "The reader contract"): Lost says some were
// dropped, and a reader then reads everything again.
//
// # Releasing an event's ops
//
// An event's Ops and their Data live in memory the watcher uses again
// (mem.go): an iptables-nft sync carries thousands of rule messages, which
// as fresh copies per commit made the collector a large share of the
// agent's CPU (see BENCHMARKS.md, "Live: the agent beside kube-proxy
// (issue 16)"). The contract is this, and only this:
//
//   - The reader an event is applied to (datapath.ChangeApplier.ApplyChange)
//     owns it. It may call Event.Release once it keeps no Op, no Data slice
//     and not the Ops slice; after that this copy's Ops is nil and other
//     copies point at memory being filled again.
//   - Nobody else calls Release: the agent hands every event to exactly one
//     ApplyChange and keeps no Ops itself.
//   - Release is idempotent (a second call, or a call on another copy of
//     a released event, does nothing), and an event never released is
//     collected by the garbage collector like any value: releasing is an
//     optimisation, never needed for correctness.
//
// The watcher itself releases an event it drops because the reader fell
// behind.
//
// # Dating commits
//
// A transaction is dated (Event.Received) by the kernel's clock when the
// commit stamp (stamp.go, bpf/stamp.c) can be attached to the watcher's
// socket, else by the read of its first message.
//
// # Observations of event-fed readers
//
// Both event-fed readers (nftables, iptables-nft over netlink) follow one
// protocol for the model.Observed they return, implemented once here:
// Observation keeps Version, Since, Changed and Frozen (observed.go), with
// one version sequence for the process (NextVersion), and Behind is their
// one rule for waiting for events while the kernel's generation is ahead
// of what they keep (behind.go).
package nfevents
