package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
)

var staleConntrackDesc = prometheus.NewDesc("netdrift_stale_conntrack_entries",
	"Conntrack entries to a Service frontend whose DNAT backend is no longer valid, by protocol.", []string{"protocol"}, nil)

// NodeCollector exports what the node-level checks measured.
type NodeCollector struct{ info func() nodecheck.Info }

// NewNodeCollector exports info() at scrape time.
func NewNodeCollector(info func() nodecheck.Info) NodeCollector { return NodeCollector{info} }

// Describe implements prometheus.Collector.
func (c NodeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- staleConntrackDesc }

// Collect implements prometheus.Collector.
func (c NodeCollector) Collect(ch chan<- prometheus.Metric) {
	info := c.info()
	for _, p := range []model.Protocol{model.TCP, model.UDP} {
		ch <- prometheus.MustNewConstMetric(staleConntrackDesc, prometheus.GaugeValue, float64(info.StaleConntrack[p]), string(p))
	}
}
