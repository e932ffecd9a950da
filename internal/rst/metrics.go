package rst

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/metrics/servicecap"

	"github.com/netdrift/netdrift/internal/model"
)

var (
	rstsDesc = prometheus.NewDesc("netdrift_terminating_rsts_total",
		"TCP resets sent by or to this node's pods at or after their deletion request (terminating or recently deleted), "+
			"by service; the terminating and deleted states of netdrift_endpoint_rsts_total. "+
			"Series beyond the cap are summed under namespace=\"_other\",service=\"_other\".",
		[]string{"namespace", "service"}, nil)
	stateDesc = prometheus.NewDesc("netdrift_endpoint_rsts_total",
		"TCP resets sent by or to this node's pods, by service and the endpoint's state when the reset was sent "+
			"(ready, not_ready, terminating, deleted). Resets sent before any known deletion request appear once settled "+
			"(netdrift_rst_unsettled).",
		[]string{"namespace", "service", "state"}, nil)
	refusalsDesc = prometheus.NewDesc("netdrift_ready_endpoint_refusals_total",
		"TCP resets a Ready endpoint of this node sent from its Service's target port to a connection attempt with no "+
			"listener (clients refused while Ready: the readiness probe does not cover the listener), by service.",
		[]string{"namespace", "service"}, nil)
	unsettledDesc = prometheus.NewDesc("netdrift_rst_unsettled",
		"Resets counted before any known deletion request of their pod, not yet settled as ready or terminating.",
		nil, nil)
	upDesc = prometheus.NewDesc("netdrift_rst_probe_up",
		"1 when the eBPF RST probe is attached; mode says how (tracepoint, fentry), none when it is not.",
		[]string{"mode"}, nil)
	droppedDesc = prometheus.NewDesc("netdrift_rst_probe_events_dropped_total",
		"RST events not delivered (counters still count them), by cause.",
		[]string{"cause"}, nil)
)

// Snapshotter is what Metrics reads: the pipeline's Snapshot.
type Snapshotter interface{ Snapshot() Snapshot }

// Metrics is the prometheus.Collector of the RST pipeline: each scrape
// reads the pipeline's Snapshot, the totals /v1/rsts serves. Its service
// series follow netdrift's one series cap (servicecap).
type Metrics struct {
	src Snapshotter
	cap *servicecap.Cap
}

// NewMetrics returns a collector over src with at most maxSeries services'
// own series (servicecap.DefaultMax when <= 0).
func NewMetrics(src Snapshotter, maxSeries int) *Metrics {
	return &Metrics{src: src, cap: servicecap.New(maxSeries)}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- rstsDesc
	ch <- stateDesc
	ch <- refusalsDesc
	ch <- unsettledDesc
	ch <- upDesc
	ch <- droppedDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.src.Snapshot()
	for k, v := range m.series(s.Totals) {
		ch <- prometheus.MustNewConstMetric(rstsDesc, prometheus.CounterValue, float64(v), k.Namespace, k.Name)
	}
	for k, c := range m.stateSeries(s.ByState) {
		for _, sv := range []struct {
			state string
			n     uint64
		}{{"ready", c.Ready}, {"not_ready", c.NotReady}, {"terminating", c.Terminating}, {"deleted", c.Deleted}} {
			if sv.n > 0 {
				ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.CounterValue, float64(sv.n), k.Namespace, k.Name, sv.state)
			}
		}
		if c.ReadyRefusals > 0 {
			ch <- prometheus.MustNewConstMetric(refusalsDesc, prometheus.CounterValue, float64(c.ReadyRefusals), k.Namespace, k.Name)
		}
	}
	ch <- prometheus.MustNewConstMetric(unsettledDesc, prometheus.GaugeValue, float64(s.Unsettled))
	up, mode := 0.0, s.Status.Mode
	if s.Status.Up {
		up = 1
	}
	if mode == "" {
		mode = ModeNone
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, string(mode))
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(s.Sampling.RateLimited), "rate_limited")
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(s.Sampling.RingFull), "ring_full")
}

// stateSeries is series for the per-state counts.
func (m *Metrics) stateSeries(by map[model.ServiceName]StateCounts) map[model.ServiceName]StateCounts {
	keys := make([]model.ServiceName, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	label := m.cap.Labels(keys)
	out := map[model.ServiceName]StateCounts{}
	for k, c := range by {
		k = label(k)
		o := out[k]
		o.Ready += c.Ready
		o.NotReady += c.NotReady
		o.Terminating += c.Terminating
		o.Deleted += c.Deleted
		o.ReadyRefusals += c.ReadyRefusals
		o.TerminatingRefusals += c.TerminatingRefusals
		out[k] = o
	}
	return out
}

// series sums the totals by series.
func (m *Metrics) series(totals map[model.ServiceName]uint64) map[model.ServiceName]uint64 {
	return servicecap.Sum(m.cap, totals)
}
