package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/drift"
)

var preStopDesc = prometheus.NewDesc("netdrift_recommended_prestop_seconds",
	"Recommended preStop sleep: p99 of this node's endpoint-removal latency (T2-T0) over 30 min, +20% +1 s, rounded up. Absent without removal samples.",
	nil, nil)

// PreStop exports drift.RecommendPreStop over the agent's lag samples.
type PreStop struct{ state func() agent.State }

// NewPreStop exports the recommendation of state().
func NewPreStop(state func() agent.State) PreStop { return PreStop{state} }

// Describe implements prometheus.Collector.
func (c PreStop) Describe(ch chan<- *prometheus.Desc) { ch <- preStopDesc }

// Collect implements prometheus.Collector.
func (c PreStop) Collect(ch chan<- prometheus.Metric) {
	s := c.state()
	if v, ok := drift.RecommendPreStop(s.Recent, s.Now, drift.PreStopWindow); ok {
		ch <- prometheus.MustNewConstMetric(preStopDesc, prometheus.GaugeValue, v)
	}
}
