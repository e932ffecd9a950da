package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The JSON shapes below are the subset of netdrift's internal/api types the
// scenarios read. They are declared here (the lab is its own module) and
// decoded strictly enough that a renamed field shows up as a missing value.

// Finding is one entry of /v1/drift findings or pending.
type Finding struct {
	Kind       string     `json:"kind"`
	Service    string     `json:"service"`
	Port       string     `json:"port"`
	Frontend   string     `json:"frontend"`
	Backend    string     `json:"backend"`
	Subject    string     `json:"subject"`
	Detail     string     `json:"detail"`
	FirstSeen  *time.Time `json:"first_seen"`
	AgeSeconds *float64   `json:"age_seconds"`
	// Connections: new connections sent to a stale_backend finding's backend.
	Connections *uint64 `json:"connections"`
}

// Drift is /v1/drift.
type Drift struct {
	Node     string    `json:"node"`
	Datapath string    `json:"datapath"`
	Findings []Finding `json:"findings"`
	Pending  []Finding `json:"pending"`
}

// Status is /v1/status (subset).
type Status struct {
	Node                       string  `json:"node"`
	Datapath                   string  `json:"datapath"`
	Ready                      bool    `json:"ready"`
	ReadyReason                string  `json:"ready_reason"`
	Converged                  bool    `json:"converged"`
	PendingChanges             int     `json:"pending_changes"`
	OldestPendingChangeSeconds float64 `json:"oldest_pending_change_seconds"`
	Findings                   int     `json:"findings"`
	Watch                      struct {
		Synced  bool   `json:"synced"`
		Healthy bool   `json:"healthy"`
		Reason  string `json:"reason"`
	} `json:"watch"`
	RSTProbe *struct {
		Up     bool   `json:"up"`
		Mode   string `json:"mode"`
		Reason string `json:"reason"`
	} `json:"rst_probe"`
}

// LagSample is one converged change of /v1/lag.
type LagSample struct {
	Service               string    `json:"service"`
	Change                string    `json:"change"`
	T0                    time.Time `json:"t0"`
	T1                    time.Time `json:"t1"`
	T2                    time.Time `json:"t2"`
	T2Source              string    `json:"t2_source"` // map-write-stamp: dated by the kernel's stamp (cilium mode)
	NodeLagSeconds        float64   `json:"node_lag_seconds"`
	NetworkLatencySeconds *float64  `json:"network_latency_seconds"`
	// Superseded: how many older changes of the service this one replaced
	// before converging (they have no sample of their own).
	Superseded int `json:"superseded"`
}

// Lag is /v1/lag (subset).
type Lag struct {
	Node    string      `json:"node"`
	Samples []LagSample `json:"samples"`
	Pending []struct {
		Service    string    `json:"service"`
		Change     string    `json:"change"`
		T1         time.Time `json:"t1"`
		AgeSeconds float64   `json:"age_seconds"`
	} `json:"pending"`
}

// RSTReport is /v1/rsts (subset).
type RSTReport struct {
	Probe struct {
		Up     bool   `json:"up"`
		Mode   string `json:"mode"`
		Reason string `json:"reason"`
	} `json:"probe"`
	Watched   []string                  `json:"watched"`
	Totals    map[string]uint64         `json:"totals"`
	ByState   map[string]RSTStateCounts `json:"by_state"`
	Unsettled uint64                    `json:"unsettled"`
	Events    []RSTEvent                `json:"events"`
}

// RSTStateCounts are one service's resets by the endpoint's state.
type RSTStateCounts struct {
	Ready               uint64 `json:"ready"`
	NotReady            uint64 `json:"not_ready"`
	Terminating         uint64 `json:"terminating"`
	Deleted             uint64 `json:"deleted"`
	ReadyRefusals       uint64 `json:"ready_refusals"`
	TerminatingRefusals uint64 `json:"terminating_refusals"`
}

// RSTEvent is one RST of /v1/rsts events (subset).
type RSTEvent struct {
	Time      time.Time `json:"time"`
	Direction string    `json:"direction"`
	Reason    string    `json:"reason"`
	Service   string    `json:"service"`
	Namespace string    `json:"namespace"`
}

// Agent queries one node's agent through an HTTP client whose sockets live
// in that node's namespace (the agent listens on the node IP).
type Agent struct {
	Node string
	Base string // http://nodeIP:9760
	HTTP *http.Client
}

// Get decodes the JSON at path into v.
func (a *Agent) Get(ctx context.Context, path string, v any) error {
	body, err := a.Raw(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("agent %s: decoding %s: %w", a.Node, path, err)
	}
	return nil
}

// Raw returns the body of path (status 200 only).
func (a *Agent) Raw(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.Node, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("agent %s: reading %s: %w", a.Node, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent %s: %s: %s: %s", a.Node, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// Metrics fetches and parses /metrics.
func (a *Agent) Metrics(ctx context.Context) (Samples, error) {
	body, err := a.Raw(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	return ParseMetrics(string(body))
}
