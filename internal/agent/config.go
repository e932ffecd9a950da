// Package agent runs netdrift's audit loop: it keeps the desired state of
// this node up to date from the watch and audits the datapath — reads it
// and compares it with the desired state — after change events, fast while
// changes are pending and slowly otherwise; it tracks convergence lag and
// promotes old mismatches to stale findings. An audit is that read and
// compare; a full audit is one that also derives the desired state again
// and has the reader read everything (FullAuditInterval).
package agent

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/watch"

	"github.com/netdrift/netdrift/internal/model"
)

// Config holds every setting of the audit loop (no package globals).
type Config struct {
	NodeName   string
	StaleAfter time.Duration // a mismatch older than this becomes a finding
	FastPoll   time.Duration // re-read interval while changes are pending
	// EventPoll replaces FastPoll while nf_tables change events flow (each
	// kube-proxy commit triggers a read by itself).
	EventPoll time.Duration
	// ChangeBatch: while change events flow, a delivered change is compared
	// with the datapath at most this long after the last read rather than
	// at once — the events date what the read finds, so batching the
	// deliveries of a burst into one read loses no lag precision.
	ChangeBatch time.Duration
	// AuditInterval is the interval of the audits (datapath reads compared
	// with the desired state) while nothing is pending; not the full audit's
	// (FullAuditInterval).
	AuditInterval time.Duration
	// WatchUnhealthyAfter: no Lease renewal delivered for this long means the
	// watch lags (kubelet renews every 10 s).
	WatchUnhealthyAfter time.Duration
	// MinPollCostFactor keeps polling cheap: the fast-poll interval is at
	// least this many times the last datapath read's duration.
	MinPollCostFactor int
	// NodeRunCostFactor bounds the node runs (routes, links, conntrack,
	// cluster-scope checks): one runs at most every this many times the
	// last one's duration (100: about 1 % of a core), and never more often
	// than AuditInterval.
	NodeRunCostFactor int
	// AuditCostFactor bounds the idle audit likewise: at most every this
	// many times the last read's cost (100: about 1 % of a core).
	AuditCostFactor int
	// FullAuditInterval is the cadence of the full audit, the safety net of
	// the incremental path: the desired state is derived again from the
	// watch cache, the reader reads everything (a reader that keeps its
	// state from change events, datapath.AuditRequester, reads it beside
	// that state and keeps the state while commits spoil the read), and
	// every frontend is compared. It runs at most every FullAuditCostFactor
	// times its last read's cost (200: 0.5 % of a core).
	FullAuditInterval   time.Duration
	FullAuditCostFactor int
	// RecentSamples bounds the lag samples kept for /v1/lag.
	RecentSamples int
	// API, when set, reports how the list and watch requests to the API
	// server fare (APIHealth.State): a failing API is no current view, and
	// the watch health reason says since when.
	API func() APIState
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		StaleAfter:          5 * time.Second,
		FastPoll:            100 * time.Millisecond,
		EventPoll:           time.Second,
		ChangeBatch:         250 * time.Millisecond,
		AuditInterval:       10 * time.Second,
		WatchUnhealthyAfter: 25 * time.Second,
		MinPollCostFactor:   20,
		NodeRunCostFactor:   100,
		AuditCostFactor:     100,
		FullAuditInterval:   5 * time.Minute,
		FullAuditCostFactor: 200,
		RecentSamples:       1000,
	}
}

// Cluster is the agent's view of the API (the Watcher, or a fake in tests).
type Cluster interface {
	Synced() (bool, string)
	Service(key model.ServiceName) *corev1.Service
	SlicesFor(service model.ServiceName) []*discoveryv1.EndpointSlice
	Node(name string) *corev1.Node
	ServiceKeys() []model.ServiceName
	State() *watch.ClusterState
}

// Recorder receives measurements as they happen (the Prometheus metrics).
type Recorder interface {
	ObserveLag(s drift.LagSample)
	ObserveWatchDelay(source string, d time.Duration)
}

type nopRecorder struct{}

func (nopRecorder) ObserveLag(drift.LagSample)              {}
func (nopRecorder) ObserveWatchDelay(string, time.Duration) {}
