// Package api serves netdrift's read-only HTTP API and defines its JSON
// types; the CLI client decodes the same types.
package api

import "time"

// Finding is the JSON shape of a finding, shared by `netdrift diff -o json`
// and /v1/drift.
type Finding struct {
	Kind         string     `json:"kind"`
	Scope        string     `json:"scope,omitempty"`
	Service      string     `json:"service,omitempty"`
	Port         string     `json:"port,omitempty"`
	Protocol     string     `json:"protocol,omitempty"`
	Frontend     string     `json:"frontend,omitempty"`
	FrontendKind string     `json:"frontend_kind,omitempty"`
	Backend      string     `json:"backend,omitempty"`
	Subject      string     `json:"subject,omitempty"`
	Detail       string     `json:"detail"`
	Evidence     []string   `json:"evidence,omitempty"`
	FirstSeen    *time.Time `json:"first_seen,omitempty"`
	AgeSeconds   *float64   `json:"age_seconds,omitempty"`
	// Connections: for a stale_backend finding of the live agent, the new
	// connections (conntrack NEW) this node sent to its backend while it was
	// found; absent when not counted (offline, or no conntrack events).
	Connections *uint64 `json:"connections,omitempty"`
}

// DiffReport is the output of `netdrift diff -o json`.
type DiffReport struct {
	Node     string    `json:"node"`
	Datapath string    `json:"datapath"`
	Findings []Finding `json:"findings"`
	Warnings []string  `json:"warnings,omitempty"`
}

// View says whether an answer rests on a current view of the cluster (the
// caches synced, the watch healthy, the API server answering) and of the
// datapath (the last read succeeded). While it does not, a finding count,
// an unknown service or an empty lag is no statement about the node.
type View struct {
	Current bool `json:"current"`
	// Code is why not current: starting, api_failing, caches_not_synced,
	// watch_unhealthy, no_datapath, datapath_read_failed or datapath_behind.
	Code      string    `json:"code,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Since     time.Time `json:"since,omitzero"` // when it became (not) current
	LastError string    `json:"last_error,omitempty"`
	// DatapathBehindCommits counts the nf_tables commits the datapath view
	// has not read yet, DatapathBehindSince dates the first of them (both
	// omitted when the view is up to date or there are no change events).
	// An answer is as of that time; past stale-after the view is not current.
	DatapathBehindCommits int       `json:"datapath_behind_commits,omitempty"`
	DatapathBehindSince   time.Time `json:"datapath_behind_since,omitzero"`
}

// Fallback is a degraded path in force: a reader reading by a worse path
// than its preferred one, change events replaced by polling.
type Fallback struct {
	Reader string    `json:"reader"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

// Drift is /v1/drift.
type Drift struct {
	Node     string    `json:"node"`
	Datapath string    `json:"datapath"`
	View     *View     `json:"view,omitempty"` // set by every agent that reports it
	Findings []Finding `json:"findings"`
	// Pending are mismatches younger than --stale-after or not yet proven
	// against a current watch: they may be normal convergence.
	Pending []Finding `json:"pending"`
	// Warnings are the datapath reader's: rules it could not interpret, a
	// fallback in force, a read that mixed generations. The findings of
	// what they concern may be incomplete.
	Warnings []string `json:"warnings,omitempty"`
}

// Status is /v1/status.
type Status struct {
	Node           string   `json:"node"`
	Datapath       string   `json:"datapath"`
	DatapathReason string   `json:"datapath_reason,omitempty"`
	Ready          bool     `json:"ready"`
	ReadyReason    string   `json:"ready_reason,omitempty"`
	View           *View    `json:"view,omitempty"`
	Converged      bool     `json:"converged"`
	Watch          Watch    `json:"watch"`
	Sources        []Source `json:"sources"`
	// Fallbacks are the degraded paths in force; ReaderWarnings the
	// datapath reader's warnings of its last read (as /v1/drift warnings).
	Fallbacks                  []Fallback `json:"fallbacks"`
	ReaderWarnings             []string   `json:"reader_warnings"`
	PendingChanges             int        `json:"pending_changes"`
	OldestPendingChangeSeconds float64    `json:"oldest_pending_change_seconds"`
	Findings                   int        `json:"findings"`
	PendingMismatches          int        `json:"pending_mismatches"`
	LastAudit                  time.Time  `json:"last_audit,omitzero"`
	RecommendedPreStopSeconds  *float64   `json:"recommended_prestop_seconds,omitempty"`
	RSTProbe                   *Probe     `json:"rst_probe,omitempty"`
	Notes                      []string   `json:"notes,omitempty"`
	// Report is the NodeReport publisher's state (absent when not wired).
	Report *ReportStatus `json:"report,omitempty"`
}

// ReportStatus is the NodeReport publisher's state: whether it runs, its
// last successful write and the error of its last attempt, if it failed.
type ReportStatus struct {
	Enabled   bool      `json:"enabled"`
	LastWrite time.Time `json:"last_write,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// Watch is the watch's health.
type Watch struct {
	Synced            bool      `json:"synced"`
	Healthy           bool      `json:"healthy"`
	Reason            string    `json:"reason,omitempty"`
	LeaseDelaySeconds *float64  `json:"lease_delay_seconds,omitempty"`
	LastLeaseRenew    time.Time `json:"last_lease_renew,omitzero"`
	LastDelivery      time.Time `json:"last_delivery,omitzero"`
}

// Source is one source's health.
type Source struct {
	Name            string    `json:"name"`
	Up              bool      `json:"up"`
	Error           string    `json:"error,omitempty"`
	Detail          string    `json:"detail,omitempty"`
	DurationSeconds float64   `json:"duration_seconds"`
	LastSuccess     time.Time `json:"last_success,omitzero"`
}

// Probe is the RST probe's status.
type Probe struct {
	Up     bool   `json:"up"`
	Mode   string `json:"mode,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// LagSample is one converged change.
type LagSample struct {
	Service               string    `json:"service"`
	Change                string    `json:"change"`
	T0                    time.Time `json:"t0,omitzero"`
	T0Source              string    `json:"t0_source,omitempty"`
	T1                    time.Time `json:"t1"`
	T2                    time.Time `json:"t2"`
	T2Source              string    `json:"t2_source,omitempty"`
	NodeLagSeconds        float64   `json:"node_lag_seconds"`
	NetworkLatencySeconds *float64  `json:"network_latency_seconds,omitempty"`
	Superseded            int       `json:"superseded,omitempty"`
}

// PendingChange is a change not yet programmed.
type PendingChange struct {
	Service    string    `json:"service"`
	Change     string    `json:"change"`
	T0         time.Time `json:"t0,omitzero"`
	T1         time.Time `json:"t1"`
	AgeSeconds float64   `json:"age_seconds"`
}

// Percentiles of a set of durations, in seconds.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Lag is /v1/lag.
type Lag struct {
	Node           string                 `json:"node"`
	View           *View                  `json:"view,omitempty"`
	Samples        []LagSample            `json:"samples"`
	Pending        []PendingChange        `json:"pending"`
	NodeLag        map[string]Percentiles `json:"node_lag"`        // by change kind and "all"
	NetworkLatency map[string]Percentiles `json:"network_latency"` // by change kind and "all"
}

// Verdict is one side of a frontend's comparison.
type Verdict struct {
	Action    string   `json:"action"`
	Backends  []string `json:"backends,omitempty"`
	Uncertain string   `json:"uncertain,omitempty"`
	Evidence  []string `json:"evidence,omitempty"`
}

// FrontendView is desired vs observed for one frontend.
type FrontendView struct {
	Frontend     string   `json:"frontend"`
	FrontendKind string   `json:"frontend_kind"`
	Port         string   `json:"port"`
	Protocol     string   `json:"protocol"`
	Desired      *Verdict `json:"desired,omitempty"`
	Observed     *Verdict `json:"observed,omitempty"`
	Match        bool     `json:"match"`
}

// Endpoint is an endpoint with its conditions and why it is (not) a backend.
type Endpoint struct {
	Port        string `json:"port"`
	Address     string `json:"address"`
	Node        string `json:"node,omitempty"`
	Ready       bool   `json:"ready"`
	Serving     bool   `json:"serving"`
	Terminating bool   `json:"terminating"`
	Included    bool   `json:"included"`
	Reason      string `json:"reason,omitempty"`
}

// ServiceView is /v1/services/NS/NAME.
type ServiceView struct {
	Service   string         `json:"service"`
	View      *View          `json:"view,omitempty"`
	Exists    bool           `json:"exists"`
	Frontends []FrontendView `json:"frontends"`
	Endpoints []Endpoint     `json:"endpoints"`
	Findings  []Finding      `json:"findings"` // stale findings
	// PendingMismatches are mismatches younger than --stale-after or not yet
	// proven against a current watch (as in /v1/drift "pending").
	PendingMismatches []Finding       `json:"pending_mismatches"`
	Pending           []PendingChange `json:"pending_changes"`
	Lag               []LagSample     `json:"lag"`
	RSTs              *ServiceRSTs    `json:"rsts,omitempty"`
	Advice            []string        `json:"advice,omitempty"`
}

// ServiceRSTs summarises RSTs attributed to a service.
type ServiceRSTs struct {
	// Total: sent by or to its terminating and deleted pods
	// (netdrift_terminating_rsts_total).
	Total uint64 `json:"total"`
	// By the endpoint's state when sent (netdrift_endpoint_rsts_total).
	Ready       uint64 `json:"ready"`
	NotReady    uint64 `json:"not_ready"`
	Terminating uint64 `json:"terminating"`
	Deleted     uint64 `json:"deleted"`
	// ReadyRefusals: sent by Ready endpoints from the service's target port
	// (netdrift_ready_endpoint_refusals_total).
	ReadyRefusals uint64 `json:"ready_refusals"`
	// TerminatingRefusals: the same sent by terminating and deleted pods.
	TerminatingRefusals uint64 `json:"terminating_refusals"`
}
