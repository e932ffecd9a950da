package api

import "github.com/netdrift/netdrift/internal/rst"

// RSTReport is /v1/rsts.
type RSTReport struct {
	Probe   Probe             `json:"probe"`
	Watched []string          `json:"watched"`
	Totals  map[string]uint64 `json:"totals"`
	Events  []rst.Record      `json:"events"`
	// RecommendedPreStopSeconds: see recommendPreStop.
	RecommendedPreStopSeconds *float64 `json:"recommended_prestop_seconds,omitempty"`
}
