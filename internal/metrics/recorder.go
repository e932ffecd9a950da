// Package metrics exports netdrift's state as Prometheus metrics:
// netdrift_<subsystem>_<name>_<unit>, _total on counters, bounded labels.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/drift"
)

// NetworkProgrammingBuckets are kube-proxy's buckets for
// kubeproxy_network_programming_duration_seconds, so the two compare directly:
// 0.25 s, 0.5 s, 1..59 s, 60..115 s by 5 s, 120..300 s by 30 s.
func NetworkProgrammingBuckets() []float64 {
	var b []float64
	b = append(b, prometheus.LinearBuckets(0.25, 0.25, 2)...)
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)
	b = append(b, prometheus.LinearBuckets(120, 30, 7)...)
	return b
}

// Recorder holds the histograms fed as measurements happen.
type Recorder struct {
	nodeLag    *prometheus.HistogramVec
	netLatency *prometheus.HistogramVec
	watchDelay *prometheus.HistogramVec
	// the watch-delay observers of the sources the agent reports, resolved
	// once: ObserveWatchDelay runs on every EndpointSlice delivery, where
	// hashing the label value each time was a visible share of the agent's
	// CPU under churn
	delayBySource map[string]prometheus.Observer
}

// NewRecorder creates the histograms; register them with Register.
func NewRecorder() *Recorder {
	r := &Recorder{
		nodeLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "netdrift_node_programming_lag_seconds",
			Help:    "Time from the watch delivering a Service/EndpointSlice change to this node's datapath matching it (T2-T1).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"change"}),
		netLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "netdrift_network_programming_latency_seconds",
			Help:    "Time from the EndpointSlice trigger time to this node's datapath matching it (T2-T0); kube-proxy's buckets.",
			Buckets: NetworkProgrammingBuckets(),
		}, []string{"change"}),
		watchDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "netdrift_watch_delay_seconds",
			Help:    "Delay between an object's change time and the agent's watch receiving it (lease: kubelet renewTime, same clock).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"source"}),
	}
	for _, c := range []string{string(drift.ChangeAdd), string(drift.ChangeRemove), string(drift.ChangeUpdate)} {
		r.nodeLag.WithLabelValues(c)
		r.netLatency.WithLabelValues(c)
	}
	r.delayBySource = map[string]prometheus.Observer{}
	for _, src := range []string{"lease", "endpointslice"} {
		r.delayBySource[src] = r.watchDelay.WithLabelValues(src)
	}
	return r
}

// ObserveLag records one converged change.
func (r *Recorder) ObserveLag(s drift.LagSample) {
	r.nodeLag.WithLabelValues(string(s.Kind)).Observe(nonNeg(s.NodeLag()))
	if l, ok := s.NetworkLatency(); ok {
		r.netLatency.WithLabelValues(string(s.Kind)).Observe(nonNeg(l))
	}
}

// ObserveWatchDelay records a watch delivery delay.
func (r *Recorder) ObserveWatchDelay(source string, d time.Duration) {
	o, ok := r.delayBySource[source]
	if !ok {
		o = r.watchDelay.WithLabelValues(source)
	}
	o.Observe(nonNeg(d))
}

func nonNeg(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return d.Seconds()
}

// Collectors returns the recorder's collectors.
func (r *Recorder) Collectors() []prometheus.Collector {
	return []prometheus.Collector{r.nodeLag, r.netLatency, r.watchDelay}
}
