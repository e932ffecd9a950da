package rst

import (
	"net/netip"
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

// Metrics is the prometheus.Collector of the RST probe. The agent calls
// Observe with each Counts() reading and the current lookup table, and
// SetStatus / SetStats when they change.
type Metrics struct {
	mu        sync.Mutex
	tracker   *Tracker
	maxSeries int
	admitted  map[ServiceKey]bool
	status    Status
	stats     Stats
}

// NewMetrics returns a collector with at most maxSeries service series
// (DefaultMaxSeries when <= 0).
func NewMetrics(maxSeries int) *Metrics {
	if maxSeries <= 0 {
		maxSeries = DefaultMaxSeries
	}
	return &Metrics{
		tracker:   NewTracker(),
		maxSeries: maxSeries,
		admitted:  map[ServiceKey]bool{},
		status:    Status{Mode: ModeNone},
	}
}

// Observe attributes the increase of counts since the previous call.
func (m *Metrics) Observe(counts map[netip.Addr]Counts, tbl Table) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tracker.Observe(counts, tbl)
	var fresh []ServiceKey
	for k := range m.tracker.totals {
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
}

// SetStatus records the probe's status for netdrift_rst_probe_up.
func (m *Metrics) SetStatus(s Status) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status = s
}

// SetStats records the probe's loss counters.
func (m *Metrics) SetStats(s Stats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats = s
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- rstsDesc
	ch <- upDesc
	ch <- droppedDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	series := map[ServiceKey]uint64{}
	for k, v := range m.tracker.totals {
		if !m.admitted[k] {
			k = ServiceKey{Namespace: LabelOther, Service: LabelOther}
		}
		series[k] += v
	}
	for k, v := range series {
		ch <- prometheus.MustNewConstMetric(rstsDesc, prometheus.CounterValue, float64(v), k.Namespace, k.Service)
	}
	up := 0.0
	mode := m.status.Mode
	if m.status.Up {
		up = 1
	}
	if mode == "" {
		mode = ModeNone
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, string(mode))
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(m.stats.EventsRateLimited), "rate_limited")
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(m.stats.EventsLost), "ring_full")
}
