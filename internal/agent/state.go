package agent

import (
	"time"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
)

// SourceStatus is the health of one source (datapath reader, watch, probe).
type SourceStatus struct {
	Name        string
	Up          bool
	Error       string
	Detail      string // e.g. chosen backend, probe mode
	LastAttempt time.Time
	LastSuccess time.Time
	Duration    time.Duration // of the last attempt
}

// WatchStatus says how current the agent's view of the API is.
type WatchStatus struct {
	Synced            bool
	SyncReason        string
	Healthy           bool
	HealthReason      string
	LeaseSeen         bool
	LastLeaseRenew    time.Time // kubelet's renewTime
	LastLeaseDelivery time.Time // when the watch delivered it
	LeaseDelay        time.Duration
	LastDelivery      time.Time // any watch delivery
}

// Fallback is a degraded path in force: a reader reading by a worse path
// than its preferred one (iptables-nft read with iptables-save instead of
// over netlink), change events replaced by polling, events dated when read.
type Fallback struct {
	Reader   string // what falls back: iptables, nftables change events
	From, To string // the preferred path and the one in use
	Reason   string
	Since    time.Time
}

// State is an immutable snapshot of the agent, for the API and metrics.
type State struct {
	Node           string
	Datapath       string
	DatapathReason string
	Ready          bool
	ReadyReason    string
	Now            time.Time
	LastAudit      time.Time
	Watch          WatchStatus
	// View says whether the answers rest on a current view of the cluster
	// and of the datapath; Ready is View.Current.
	View           View
	Fallbacks      []Fallback // degraded paths in force, by reader
	Sources        []SourceStatus
	Stale          []drift.Tracked       // promoted findings
	Pending        []drift.Tracked       // mismatches younger than stale-after (or unproven)
	PendingChanges []drift.PendingChange // changes not yet programmed
	Recent         []drift.LagSample     // newest last
	Desired        model.Desired
	Observed       model.Observed
	// DesiredFrontends and ObservedFrontends count the frontends of both
	// states, also when SummaryState leaves the maps out.
	DesiredFrontends, ObservedFrontends int
	Notes                               []string // degraded-mode explanations
	// FullAudits counts the full audits run; FullAuditCorrections the
	// services whose incrementally kept desired state they corrected (each
	// one a missed delivery or a bug in the incremental path).
	FullAudits, FullAuditCorrections uint64
	// ReaderAudits counts the datapath reader's own audits of the state it
	// patches from change messages (iptables-nft); ReaderAuditDiffs those
	// that found it differed from the kernel's (corrected by the audit);
	// ReaderAuditsDeferred those put off because commits kept interrupting
	// their read (the patched state kept, the audit tried again later).
	ReaderAudits, ReaderAuditDiffs, ReaderAuditsDeferred uint64
	// ChangeEventsLost counts the lost-events notices of the nf_tables
	// change events (the kernel overran the socket, or the loop fell
	// behind): each made the next read a full one.
	ChangeEventsLost uint64
	// TriggerSkew counts the changes whose trigger time was ignored as
	// skewed (their lag samples have no network latency).
	TriggerSkew TriggerSkewCounts
	// LagSamplesDropped counts the pending changes dropped without a
	// sample because a full audit corrected the desired state they waited
	// for (FullAuditCorrections).
	LagSamplesDropped uint64
}

// Converged is true when nothing is pending and nothing is stale.
func (s State) Converged() bool {
	return s.Ready && len(s.PendingChanges) == 0 && len(s.Pending) == 0 && len(s.Stale) == 0
}

// OldestPendingChange is the age of the oldest unprogrammed change.
func (s State) OldestPendingChange() time.Duration {
	if len(s.PendingChanges) == 0 {
		return 0
	}
	return s.Now.Sub(s.PendingChanges[0].T1)
}

// OldestFindingAge is the age of the oldest stale finding.
func (s State) OldestFindingAge() time.Duration {
	var max time.Duration
	for _, f := range s.Stale {
		if a := f.Age(s.Now); a > max {
			max = a
		}
	}
	return max
}
