package metrics

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/agent"
)

// viewMetrics export whether the agent's view is current and which
// degraded paths are in force: a blind agent and a fallback must show on a
// dashboard, not only in /v1/status.
type viewMetrics struct {
	current  *prometheus.Desc
	reason   *prometheus.Desc
	blind    *prometheus.Desc
	fallback *prometheus.Desc
	warnings *prometheus.Desc

	mu   sync.Mutex
	seen map[[2]string]bool // every (reader, to) fallback seen: exported 0 once over
}

func newViewMetrics() *viewMetrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &viewMetrics{
		current: d("netdrift_view_current", "1 while the agent's view is current (caches synced, watch healthy, API requests answered, last datapath read good); while 0 its answers say they rest on no current view."),
		reason:  d("netdrift_view_not_current_reason", "1 for the reason the view is not current, 0 for the others (every reason exported).", "reason"),
		blind:   d("netdrift_view_blind_seconds", "Seconds since the view stopped being current (0 while current)."),
		fallback: d("netdrift_reader_fallback_active",
			"1 while a reader reads by a fallback path (to) instead of its preferred one; 0 once over.", "reader", "to"),
		warnings: d("netdrift_reader_warnings", "Warnings of the datapath reader's last read (rules not interpreted, a fallback, a read mixing generations)."),
		seen:     map[[2]string]bool{},
	}
}

func (m *viewMetrics) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.current, m.reason, m.blind, m.fallback, m.warnings} {
		ch <- d
	}
}

func (m *viewMetrics) collect(ch chan<- prometheus.Metric, s agent.State) {
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	g(m.current, b2f(s.View.Current))
	for _, code := range agent.ViewCodes {
		g(m.reason, b2f(!s.View.Current && s.View.Code == code), code)
	}
	blind := 0.0
	if !s.View.Current && !s.View.Since.IsZero() {
		blind = s.Now.Sub(s.View.Since).Seconds()
	}
	g(m.blind, blind)
	g(m.warnings, float64(len(s.Observed.Warnings)))
	active := map[[2]string]bool{}
	for _, f := range s.Fallbacks {
		active[[2]string{f.Reader, f.To}] = true
	}
	m.mu.Lock()
	for k := range active {
		m.seen[k] = true
	}
	keys := make([][2]string, 0, len(m.seen))
	for k := range m.seen {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"\x00"+keys[i][1] < keys[j][0]+"\x00"+keys[j][1] })
	for _, k := range keys {
		g(m.fallback, b2f(active[k]), k[0], k[1])
	}
}
