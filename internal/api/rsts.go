package api

import (
	"net/http"
	"time"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"

	"github.com/netdrift/netdrift/internal/rst"
)

// RSTProvider is the RST pipeline as the API sees it (*rst.Pipeline).
type RSTProvider interface {
	// Status is the probe's, for /v1/status.
	Status() rst.Status
	// Snapshot reads the kernel's counters: /v1/rsts and the per-service
	// view serve its totals, the totals /metrics exports.
	Snapshot() rst.Snapshot
}

// Providers are the API's optional sources (nil when absent).
type Providers struct {
	RSTs RSTProvider
	Hurt HurtProvider
	// Lag is /v1/lag's state: the node, the time, the recent samples and
	// the pending changes only (agent.Agent.LagState), not a copy of the
	// desired and observed state that the full state makes on every call;
	// nil: the full state.
	Lag func() agent.State
	// Summary is the state of /readyz, /v1/status, /v1/drift and /v1/rsts:
	// all but the desired state and the observed frontends, which they do
	// not show (agent.Agent.SummaryState); nil: the full state.
	Summary func() agent.State
	// Report is the NodeReport publisher's state for /v1/status; nil: none.
	Report func() ReportStatus
}

// HurtProvider counts the new connections sent to stale backends
// (*hurt.Conns).
type HurtProvider interface {
	// Connections of the finding with this key (model.Finding.Key).
	Connections(key string) (uint64, bool)
}

// trackedWithConnections converts tracked findings, with the connections
// counted for the stale_backend ones.
func trackedWithConnections(ts []drift.Tracked, now time.Time, hp HurtProvider) []Finding {
	out := TrackedOf(ts, now)
	if hp == nil {
		return out
	}
	for i, t := range ts {
		if t.Kind != model.StaleBackend {
			continue
		}
		n, _ := hp.Connections(t.Key())
		out[i].Connections = &n
	}
	return out
}

// RSTReport is /v1/rsts.
type RSTReport struct {
	// View: the agent's (absent in trace-rsts, which has no cluster). The
	// counts are the kernel's; their attribution to services needs a
	// current watch of this node's pods.
	View    *View    `json:"view,omitempty"`
	Probe   Probe    `json:"probe"`
	Watched []string `json:"watched"`
	// Totals are the resets the kernel counted per namespace/service (the
	// totals of netdrift_terminating_rsts_total, without its series cap).
	Totals map[string]uint64 `json:"totals"`
	// ByState are every settled reset per namespace/service by the
	// endpoint's state when it was sent, with the Ready refusals
	// (netdrift_endpoint_rsts_total, netdrift_ready_endpoint_refusals_total).
	ByState map[string]rst.StateCounts `json:"by_state"`
	// Unsettled are resets sent before any deletion request the agent knows
	// of, waiting to be settled as ready or terminating (not yet in the above).
	Unsettled uint64 `json:"unsettled"`
	// Events are rate-limited samples of the counted resets, newest last;
	// EventSamples says how many were not sampled.
	Events       []RSTEvent      `json:"events"`
	EventSamples RSTEventSamples `json:"event_samples"`
	// RecommendedPreStopSeconds: see drift.RecommendPreStop.
	RecommendedPreStopSeconds *float64 `json:"recommended_prestop_seconds,omitempty"`
}

// RSTEvent is one sampled reset, attributed.
type RSTEvent struct {
	Time      time.Time `json:"time"`
	Direction string    `json:"direction"` // sent_by_watched | sent_to_watched
	Reason    string    `json:"reason"`
	// Watched is the watched side (the pod or VIP), Client the other side.
	Watched string `json:"watched"`
	Client  string `json:"client"`
	// Namespace is the watched pod's (a VIP's: its service's); Service is
	// the name of the service it stands for, in that namespace.
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Service   string `json:"service,omitempty"`
	// SecondsSinceDeletion is the reset's time minus the pod's deletion
	// request (negative: before it); absent when not deleted.
	SecondsSinceDeletion *float64 `json:"seconds_since_deletion,omitempty"`
}

// RSTEventSamples says how the events relate to the counted resets: the
// kernel emits at most RateLimitPerCPU events per second per CPU (the
// counters count every reset), and the agent keeps the newest MaxKept.
type RSTEventSamples struct {
	RateLimitPerCPU    int    `json:"rate_limit_per_cpu_per_second"`
	MaxKept            int    `json:"max_kept"`
	DroppedRateLimited uint64 `json:"dropped_rate_limited"`
	DroppedRingFull    uint64 `json:"dropped_ring_full"`
	Evicted            uint64 `json:"evicted"`
}

// ProbeOf converts the probe's status.
func ProbeOf(s rst.Status) Probe {
	return Probe{Up: s.Up, Mode: string(s.Mode), Reason: s.Reason}
}

// RSTReportOf builds /v1/rsts.
func RSTReportOf(s rst.Snapshot, preStop *float64) RSTReport {
	r := RSTReport{Probe: ProbeOf(s.Status), Watched: make([]string, 0, len(s.Watched)),
		Totals: make(map[string]uint64, len(s.Totals)), ByState: make(map[string]rst.StateCounts, len(s.ByState)),
		Unsettled: s.Unsettled, Events: make([]RSTEvent, 0, len(s.Samples)),
		EventSamples: RSTEventSamples{RateLimitPerCPU: s.Sampling.PerSecondPerCPU, MaxKept: s.Sampling.Max,
			DroppedRateLimited: s.Sampling.RateLimited, DroppedRingFull: s.Sampling.RingFull, Evicted: s.Sampling.Evicted},
		RecommendedPreStopSeconds: preStop}
	for _, a := range s.Watched {
		r.Watched = append(r.Watched, a.String())
	}
	for k, v := range s.Totals {
		r.Totals[k.String()] = v
	}
	for k, v := range s.ByState {
		r.ByState[k.String()] = v
	}
	for _, e := range s.Samples {
		r.Events = append(r.Events, RSTEventOf(e))
	}
	return r
}

// RSTEventOf converts one attributed reset. The JSON keeps the watched
// side's namespace (the pod's, or the VIP's service's) and the service's
// bare name beside it.
func RSTEventOf(e rst.Record) RSTEvent {
	ns := e.Namespace
	if ns == "" {
		ns = e.Service.Namespace
	}
	return RSTEvent{Time: e.Time, Direction: e.Direction, Reason: e.Reason, Watched: e.Watched, Client: e.Client,
		Namespace: ns, Pod: e.Pod, Service: e.Service.Name, SecondsSinceDeletion: e.SecondsSinceDeletion}
}

func (h *Handler) rsts(w http.ResponseWriter, _ *http.Request) {
	if h.providers.RSTs == nil {
		writeJSONStatus(w, http.StatusServiceUnavailable, map[string]string{"error": "RST probe not running"})
		return
	}
	s := h.summary()
	r := RSTReportOf(h.providers.RSTs.Snapshot(), preStopOf(s))
	r.View = ViewOf(s.View)
	writeJSON(w, r)
}
