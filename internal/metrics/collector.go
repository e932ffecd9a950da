package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/metrics/servicecap"
	"github.com/netdrift/netdrift/internal/model"
)

// Collector exports gauges computed from the agent's state at scrape time.
type Collector struct {
	state      func() agent.State
	version    string
	services   *servicecap.Cap // the stale-backend series
	buildInfo  *prometheus.Desc
	nodeInfo   *prometheus.Desc
	sourceUp   *prometheus.Desc
	sourceDur  *prometheus.Desc
	findings   *prometheus.Desc
	oldestF    *prometheus.Desc
	pending    *prometheus.Desc
	oldestP    *prometheus.Desc
	mismatch   *prometheus.Desc
	healthy    *prometheus.Desc
	leaseAge   *prometheus.Desc
	staleBE    *prometheus.Desc
	ready      *prometheus.Desc
	frontends  *prometheus.Desc
	lastAuditT *prometheus.Desc
	fullAudits *prometheus.Desc
	fullFixes  *prometheus.Desc
	rdAudits   *prometheus.Desc
	rdDiffs    *prometheus.Desc
	rdDefer    *prometheus.Desc
	evLost     *prometheus.Desc
	skew       *prometheus.Desc
	lagDropped *prometheus.Desc
	view       *viewMetrics
}

// NewCollector exports state(); maxServiceSeries caps per-service series.
func NewCollector(state func() agent.State, version string, maxServiceSeries int) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Collector{
		state: state, version: version, services: servicecap.New(maxServiceSeries),
		buildInfo:  d("netdrift_build_info", "Build information; always 1.", "version"),
		nodeInfo:   d("netdrift_node_info", "The node and datapath mode this agent audits; always 1.", "node", "datapath"),
		sourceUp:   d("netdrift_source_up", "1 if the source's last read succeeded.", "source"),
		sourceDur:  d("netdrift_source_scrape_duration_seconds", "Duration of the source's last read.", "source"),
		findings:   d("netdrift_findings", "Current stale findings by kind.", "kind"),
		oldestF:    d("netdrift_oldest_finding_age_seconds", "Age of the oldest current finding (0 when none)."),
		pending:    d("netdrift_pending_changes", "Service changes delivered by the watch but not yet in the datapath."),
		oldestP:    d("netdrift_oldest_pending_change_seconds", "Age of the oldest pending change (0 when none)."),
		mismatch:   d("netdrift_pending_mismatches", "Mismatches younger than --stale-after or not yet proven against a current watch."),
		healthy:    d("netdrift_watch_healthy", "1 when the watch is current (Lease renewals arrive), else 0."),
		leaseAge:   d("netdrift_watch_last_lease_delivery_age_seconds", "Seconds since the watch last delivered this node's Lease."),
		staleBE:    d("netdrift_stale_backends", "Stale backends per service (capped; the rest under service=\"_other\").", "namespace", "service"),
		ready:      d("netdrift_ready", "1 while the agent's view is current (netdrift_view_current): /readyz answers 200."),
		frontends:  d("netdrift_frontends", "Frontends in the desired and observed state.", "state"),
		lastAuditT: d("netdrift_last_audit_timestamp_seconds", "Unix time of the last datapath audit."),
		fullAudits: d("netdrift_full_audits_total", "Full audits run (desired state derived again, datapath read whole, every frontend compared)."),
		fullFixes:  d("netdrift_full_audit_corrections_total", "Services whose incrementally kept desired state a full audit corrected (a missed delivery or a bug)."),
		rdAudits:   d("netdrift_reader_audits_total", "The datapath reader's audits of the state it patches from change messages (iptables-nft, nftables)."),
		rdDiffs:    d("netdrift_reader_audit_differences_total", "Reader audits that found the patched state differed from the kernel's (a misapplied or missed change; corrected)."),
		rdDefer:    d("netdrift_reader_audits_deferred_total", "Reader audits put off because commits kept interrupting their full read (the patched state kept, the audit tried again after 30 s, doubling up to 5 minutes); rising without netdrift_reader_audits_total means the audit never completes."),
		evLost:     d("netdrift_change_events_lost_total", "Times nf_tables change notifications were lost (the kernel overran the socket buffer, or the agent fell behind); each made the next datapath read a full one."),
		skew:       d("netdrift_trigger_time_skew_total", "Changes whose EndpointSlice trigger time was ignored as skewed against this node's clock (in the future, or more than an hour before the delivery): their lag samples have no network latency.", "direction"),
		lagDropped: d("netdrift_lag_samples_dropped_total", "Changes dropped without a lag sample, by reason (desired_corrected: a full audit corrected the service's desired state; the change behind it was missed or still on its way).", "reason"),
		view:       newViewMetrics(),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.buildInfo, c.nodeInfo, c.sourceUp, c.sourceDur, c.findings, c.oldestF,
		c.pending, c.oldestP, c.mismatch, c.healthy, c.leaseAge, c.staleBE, c.ready, c.frontends, c.lastAuditT,
		c.fullAudits, c.fullFixes, c.rdAudits, c.rdDiffs, c.rdDefer, c.evLost, c.skew, c.lagDropped} {
		ch <- d
	}
	c.view.describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.state()
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	g(c.buildInfo, 1, c.version)
	g(c.nodeInfo, 1, s.Node, s.Datapath)
	g(c.ready, b2f(s.Ready))
	c.view.collect(ch, s)
	for _, src := range s.Sources {
		g(c.sourceUp, b2f(src.Up), src.Name)
		g(c.sourceDur, src.Duration.Seconds(), src.Name)
	}
	counts := map[model.FindingKind]int{}
	for _, f := range s.Stale {
		counts[f.Kind]++
	}
	for _, k := range model.AllFindingKinds {
		g(c.findings, float64(counts[k]), string(k))
	}
	g(c.oldestF, s.OldestFindingAge().Seconds())
	g(c.pending, float64(len(s.PendingChanges)))
	g(c.oldestP, s.OldestPendingChange().Seconds())
	g(c.mismatch, float64(len(s.Pending)))
	g(c.healthy, b2f(s.Watch.Healthy))
	if s.Watch.LeaseSeen {
		g(c.leaseAge, s.Now.Sub(s.Watch.LastLeaseDelivery).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.fullAudits, prometheus.CounterValue, float64(s.FullAudits))
	ch <- prometheus.MustNewConstMetric(c.fullFixes, prometheus.CounterValue, float64(s.FullAuditCorrections))
	ch <- prometheus.MustNewConstMetric(c.rdAudits, prometheus.CounterValue, float64(s.ReaderAudits))
	ch <- prometheus.MustNewConstMetric(c.rdDiffs, prometheus.CounterValue, float64(s.ReaderAuditDiffs))
	ch <- prometheus.MustNewConstMetric(c.rdDefer, prometheus.CounterValue, float64(s.ReaderAuditsDeferred))
	ch <- prometheus.MustNewConstMetric(c.evLost, prometheus.CounterValue, float64(s.ChangeEventsLost))
	ch <- prometheus.MustNewConstMetric(c.skew, prometheus.CounterValue, float64(s.TriggerSkew.Future), "future")
	ch <- prometheus.MustNewConstMetric(c.skew, prometheus.CounterValue, float64(s.TriggerSkew.Past), "past")
	ch <- prometheus.MustNewConstMetric(c.lagDropped, prometheus.CounterValue, float64(s.LagSamplesDropped), "desired_corrected")
	g(c.frontends, float64(s.DesiredFrontends), "desired")
	g(c.frontends, float64(s.ObservedFrontends), "observed")
	if !s.LastAudit.IsZero() {
		g(c.lastAuditT, float64(s.LastAudit.UnixNano())/1e9)
	}
	for k, n := range servicecap.Sum(c.services, countByService(s.Stale, model.StaleBackend)) {
		g(c.staleBE, float64(n), k.Namespace, k.Name)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// countByService counts the findings of kind per service.
func countByService(items []drift.Tracked, kind model.FindingKind) map[servicecap.Key]int {
	m := map[servicecap.Key]int{}
	for _, it := range items {
		if f := it.Finding; f.Kind == kind {
			m[f.Service.ServiceName]++
		}
	}
	return m
}
