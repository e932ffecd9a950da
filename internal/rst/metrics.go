package rst

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	rstsDesc = prometheus.NewDesc("netdrift_terminating_rsts_total",
		"TCP resets sent by or to watched (terminating or recently deleted) pod IPs and Service VIPs, by service. "+
			"Series beyond the cap are summed under namespace=\"_other\",service=\"_other\".",
		[]string{"namespace", "service"}, nil)
	upDesc = prometheus.NewDesc("netdrift_rst_probe_up",
		"1 when the eBPF RST probe is attached; mode says how (tracepoint, fentry), none when it is not.",
		[]string{"mode"}, nil)
	droppedDesc = prometheus.NewDesc("netdrift_rst_probe_events_dropped_total",
		"RST events not delivered (counters still count them), by cause.",
		[]string{"cause"}, nil)
)

// DefaultMaxSeries caps netdrift_terminating_rsts_total's series.
const DefaultMaxSeries = 500

// Snapshotter is the source of the RST metrics (the Pipeline).
type Snapshotter interface{ Snapshot() Snapshot }

// Metrics is the prometheus.Collector of the RST pipeline: each scrape
// reads the pipeline's Snapshot, the totals /v1/rsts serves. Services beyond
// the cap (in the order they first appear) are summed under _other.
type Metrics struct {
	src       Snapshotter
	mu        sync.Mutex
	maxSeries int
	admitted  map[ServiceKey]bool
}

// NewMetrics returns a collector over src with at most maxSeries service
// series (DefaultMaxSeries when <= 0).
func NewMetrics(src Snapshotter, maxSeries int) *Metrics {
	if maxSeries <= 0 {
		maxSeries = DefaultMaxSeries
	}
	return &Metrics{src: src, maxSeries: maxSeries, admitted: map[ServiceKey]bool{}}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- rstsDesc
	ch <- upDesc
	ch <- droppedDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.src.Snapshot()
	for k, v := range m.series(s.Totals) {
		ch <- prometheus.MustNewConstMetric(rstsDesc, prometheus.CounterValue, float64(v), k.Namespace, k.Service)
	}
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

// series admits new services up to the cap and sums the rest under _other.
func (m *Metrics) series(totals map[ServiceKey]uint64) map[ServiceKey]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var fresh []ServiceKey
	for k := range totals {
		if !m.admitted[k] {
			fresh = append(fresh, k)
		}
	}
	sort.Slice(fresh, func(i, j int) bool {
		if fresh[i].Namespace != fresh[j].Namespace {
			return fresh[i].Namespace < fresh[j].Namespace
		}
		return fresh[i].Service < fresh[j].Service
	})
	for _, k := range fresh {
		if len(m.admitted) >= m.maxSeries {
			break
		}
		m.admitted[k] = true
	}
	out := map[ServiceKey]uint64{}
	for k, v := range totals {
		if !m.admitted[k] {
			k = ServiceKey{Namespace: LabelOther, Service: LabelOther}
		}
		out[k] += v
	}
	return out
}
