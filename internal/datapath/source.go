// Package datapath is the contract between the agent and the kernel readers:
// what a reader is (Source, Reader and the interfaces it is made of), mode
// detection, and the Open factory that builds a reader for a mode. The
// readers live in one package per source — datapath/iptables (with the
// iptables mode's fallback policy), datapath/nftables, datapath/node and
// internal/ipvs — and satisfy these interfaces without importing this
// package; the nf_tables change feed, whose event type ChangeEvent is,
// is datapath/nfevents (docs/architecture.md, "Package rules"). The agent
// never writes to the datapath: nothing here changes kernel state.
package datapath

import (
	"context"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
)

// Source reads one kind of kube-proxy state into the observed model.
type Source interface {
	// Name is the datapath mode: model.ModeIPTables, ModeNFTables, ModeIPVS
	// (or ModeNone before a mode is detected).
	Name() string
	// Snapshot fetches and parses the current state. It never modifies it.
	Snapshot(ctx context.Context) (model.Observed, error)
}

// HintReceiver takes what the API knows (service ports, frontend kinds).
// The agent calls it when the desired state changes; a reader never pulls
// the desired state itself.
type HintReceiver interface {
	SetHints(model.Hints)
}

// ChangeEvent is one committed nf_tables transaction (kube-proxy's nftables
// mode and iptables-nft both write nf_tables tables): the change feed's one
// event type, which every event-fed reader takes as it is.
type ChangeEvent = nfevents.Event

// ChangeWatcher delivers ChangeEvents of one network namespace.
type ChangeWatcher = nfevents.Watcher

// ChangeApplier uses a change event to make the next Snapshot cheap (re-read
// only what the event names). An error means the reader dropped its cache:
// the next Snapshot reads everything.
type ChangeApplier interface {
	// ApplyChange owns the event and may release its op memory (the
	// contract: package nfevents): the caller must not use ev.Ops
	// afterwards.
	ApplyChange(ctx context.Context, ev ChangeEvent) error
	// Evented reports whether change events describe the state this reader
	// reads (nftables; iptables-nft read over netlink): every commit of
	// kube-proxy then reaches the agent as an event, which triggers and
	// dates a read, and polling is only a safety net. False for IPVS,
	// iptables-legacy and the iptables-save fallback.
	Evented() bool
}

// CostReporter says what the last read cost in CPU time (forked dump tools);
// zero when unknown (in-process netlink reads), and callers then use wall time.
type CostReporter interface {
	LastReadCPU() time.Duration
}

// Resyncer drops what a reader keeps between reads (cached tables, the
// incremental view): the next Snapshot reads and evaluates everything. The
// agent calls it for the slow full audit, the safety net of the
// incremental path.
type Resyncer interface {
	Resync()
}

// SelfAuditor is a reader that keeps its state from change messages and
// checks it against a full read now and then (iptables-nft patched from rule
// messages): how many such audits ran, how many found the kept state
// differed from the kernel's (a misapplied or missed change; the audit's full
// read corrected it), and how many were put off because commits kept
// interrupting their read. Optional: the agent reports it when its reader
// has it.
type SelfAuditor interface {
	SelfAudits() (audits, differed, deferred uint64)
}

// AuditRequester is a reader that can check the state it keeps from change
// messages against a full read without dropping it first (iptables-nft
// over netlink). The agent's full audit asks for that instead of Resync: a
// full read that kube-proxy's commits keep interrupting is then put off
// with the event-kept state still in use, where a dropped state would have
// to be read whole, and a reader that cannot complete that read falls back
// to a whole-table dump per read. Optional; Resync otherwise.
type AuditRequester interface {
	RequestAudit()
}

// Freezer is a reader whose Snapshot may share its frontends with the
// reader's cache, changed in place by the caller's next ApplyChange (the
// nftables reader: an endpoint change then costs the change, not a copy of
// every frontend). Frozen returns a copy nothing changes, for whatever keeps
// an observation or hands it to another goroutine (the published state);
// false when nothing is cached — earlier observations are then not changed
// any more either. Readers without it return observations nobody changes.
type Freezer interface {
	Frozen() (model.Observed, bool)
}

// FallbackReporter is a reader that may read by a worse path than its
// preferred one (iptables-nft over netlink falling back to iptables-save):
// the fallback in force, from "" when none. Optional: the agent shows it in
// /v1/status and its metrics.
type FallbackReporter interface {
	Fallback() (from, to, reason string, since time.Time)
}

// Reader is what the agent drives. Every reader Open returns is one.
type Reader interface {
	Source
	HintReceiver
	ChangeApplier
	CostReporter
	Resyncer
}
