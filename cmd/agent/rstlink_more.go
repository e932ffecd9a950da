package main

import (
	"context"
	"math"
	"net/netip"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/rst"
)

// servicesOf maps watched pod IPs to the service (name) whose endpoints they are.
func servicesOf(desired map[model.Frontend]model.Verdict, watched map[netip.Addr]rst.Target) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, v := range desired {
		for _, e := range v.Endpoints {
			a := e.Addr.Addr().Unmap()
			if tg, ok := watched[a]; ok && tg.Namespace == v.Service.Namespace {
				out[a] = v.Service.Name
			}
		}
	}
	return out
}

func (l *rstLink) eventLoop(ctx context.Context) {
	for ev := range l.probe.Events(ctx) {
		l.mu.Lock()
		for _, r := range rst.Attribute(ev, l.tableLocked()) {
			l.records = append(l.records, r)
			if r.Service != "" {
				l.totals[r.Namespace+"/"+r.Service]++
			}
		}
		if n := len(l.records) - maxRSTRecords; n > 0 {
			l.records = append([]rst.Record(nil), l.records[n:]...)
		}
		l.mu.Unlock()
	}
}

func (l *rstLink) extras() api.Extras {
	return api.Extras{
		Probe: func() *api.Probe {
			st := rst.Status{Mode: rst.ModeNone, Reason: "disabled by --no-rst-probe"}
			if l.probe != nil {
				st = l.probe.Status()
			}
			return &api.Probe{Up: st.Up, Mode: string(st.Mode), Reason: st.Reason}
		},
		RSTs:    func() any { return l.report() },
		PreStop: func() (float64, bool) { return recommendPreStop(l.agent.State().Recent, time.Now(), 30*time.Minute) },
		ServiceRSTs: func(svc string) int {
			l.mu.Lock()
			defer l.mu.Unlock()
			return int(l.totals[svc])
		},
	}
}

func (l *rstLink) report() api.RSTReport {
	rep := api.RSTReport{Watched: []string{}, Totals: map[string]uint64{}, Events: []rst.Record{}}
	rep.Probe = *l.extras().Probe()
	if v, ok := recommendPreStop(l.agent.State().Recent, time.Now(), 30*time.Minute); ok {
		rep.RecommendedPreStopSeconds = &v
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for a := range l.targets {
		rep.Watched = append(rep.Watched, a.String())
	}
	sort.Strings(rep.Watched)
	for k, v := range l.totals {
		rep.Totals[k] = v
	}
	rep.Events = append(rep.Events, l.records...)
	return rep
}

// recommendPreStop is the preStop sleep that would have covered this node's
// endpoint removals in the window: p99 of T2-T0 (trigger to programmed; T2-T1
// when the trigger time is unknown), plus a margin of 1 s + 20 %: the trigger
// time is second-granular, the endpoint controller batches updates, and other
// nodes (seen in the dashboard's cluster max) lag differently. Rounded up to
// whole seconds; false when there is no removal sample.
func recommendPreStop(samples []drift.LagSample, now time.Time, window time.Duration) (float64, bool) {
	var ds []time.Duration
	for _, s := range samples {
		if s.Kind != drift.ChangeRemove || now.Sub(s.T2) > window {
			continue
		}
		d, ok := s.NetworkLatency()
		if !ok {
			d = s.NodeLag()
		}
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		return 0, false
	}
	p99 := api.PercentilesOf(ds).P99
	return math.Ceil(p99*1.2 + 1), true
}

var preStopDesc = prometheus.NewDesc("netdrift_recommended_prestop_seconds",
	"Recommended preStop sleep: p99 of this node's endpoint-removal latency (T2-T0) over 30 min, +20% +1 s, rounded up. Absent without removal samples.",
	nil, nil)

// preStopCollector exports the recommendation.
type preStopCollector struct{ l *rstLink }

// Describe implements prometheus.Collector.
func (c preStopCollector) Describe(ch chan<- *prometheus.Desc) { ch <- preStopDesc }

// Collect implements prometheus.Collector.
func (c preStopCollector) Collect(ch chan<- prometheus.Metric) {
	if v, ok := recommendPreStop(c.l.agent.State().Recent, time.Now(), 30*time.Minute); ok {
		ch <- prometheus.MustNewConstMetric(preStopDesc, prometheus.GaugeValue, v)
	}
}
