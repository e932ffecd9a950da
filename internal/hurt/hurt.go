// Package hurt answers "is anyone hurt?" for stale DNAT: it counts the new
// connections (conntrack NEW events, node.WatchConntrackNew) this node sent
// to the backend of a current stale_backend finding (or mismatch still
// pending promotion), per finding and per service
// (netdrift_stale_backend_connections_total). A stale rule to a deleted pod
// nobody uses and one that eats a tenth of the traffic are different
// incidents. It reads the agent's findings; it never writes to the datapath.
package hurt

import (
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/metrics/servicecap"
	"github.com/netdrift/netdrift/internal/model"
)

// Findings returns the agent's stale findings and pending mismatches.
type Findings func() (stale, pending []drift.Tracked)

// Conns counts new connections to stale backends. Safe for concurrent use.
type Conns struct {
	findings Findings
	now      func() time.Time
	every    time.Duration

	mu         sync.Mutex
	idx        map[backendKey][]target // by (protocol, backend)
	builtAt    time.Time
	perFinding map[string]uint64         // of the current findings only: a cleared one is dropped
	perService map[servicecap.Key]uint64 // by series: at most the cap's services and Other
	services   *servicecap.Cap
}

type backendKey struct {
	proto   model.Protocol
	backend netip.AddrPort
}

type target struct {
	key      string // model.Finding.Key()
	frontend model.Frontend
	service  servicecap.Key
}

// New counts against findings, re-read at most every refresh (default 500
// ms), with at most maxSeries services' own series (servicecap).
func New(findings Findings, now func() time.Time, refresh time.Duration, maxSeries int) *Conns {
	if refresh <= 0 {
		refresh = 500 * time.Millisecond
	}
	if now == nil {
		now = time.Now
	}
	return &Conns{findings: findings, now: now, every: refresh, perFinding: map[string]uint64{},
		perService: map[servicecap.Key]uint64{}, services: servicecap.New(maxSeries)}
}

// Observe classifies one new flow: counted when its DNAT destination is a
// stale_backend finding's backend for the flow's frontend.
func (c *Conns) Observe(f model.Flow) bool {
	if !f.DNATed() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); c.idx == nil || now.Sub(c.builtAt) >= c.every {
		c.rebuildLocked(now)
	}
	back := netip.AddrPortFrom(f.Reply.Src.Addr().Unmap(), f.Reply.Src.Port())
	dst := netip.AddrPortFrom(f.Orig.Dst.Addr().Unmap(), f.Orig.Dst.Port())
	for _, t := range c.idx[backendKey{f.Protocol, back}] {
		if t.frontend.Port != dst.Port() || (t.frontend.IP.IsValid() && !t.frontend.IP.IsUnspecified() && t.frontend.IP != dst.Addr()) {
			continue
		}
		c.perFinding[t.key]++
		c.perService[c.services.Label(t.service)]++
		return true
	}
	return false
}

// Refresh re-reads the findings now (tests; Observe does it on its own).
func (c *Conns) Refresh() {
	c.mu.Lock()
	c.rebuildLocked(c.now())
	c.mu.Unlock()
}

// rebuildLocked indexes the current stale_backend findings and drops the
// counts of findings that cleared (the per-service counters keep them).
func (c *Conns) rebuildLocked(now time.Time) {
	c.builtAt = now
	c.idx = map[backendKey][]target{}
	current := map[string]bool{}
	stale, pending := c.findings()
	for _, ts := range [][]drift.Tracked{stale, pending} {
		for _, t := range ts {
			if t.Kind != model.StaleBackend || t.Frontend == nil || !t.Backend.IsValid() {
				continue
			}
			bk := backendKey{t.Frontend.Protocol, netip.AddrPortFrom(t.Backend.Addr().Unmap(), t.Backend.Port())}
			key := t.Key()
			current[key] = true
			c.idx[bk] = append(c.idx[bk], target{key: key, frontend: *t.Frontend,
				service: t.Service.ServiceName})
		}
	}
	for key := range c.perFinding {
		if !current[key] {
			delete(c.perFinding, key)
		}
	}
}

// Connections is the count of the current finding with this key
// (model.Finding.Key); false when it has none or cleared.
func (c *Conns) Connections(key string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.perFinding[key]
	return n, ok
}

var connsDesc = prometheus.NewDesc("netdrift_stale_backend_connections_total",
	"New connections (conntrack NEW) this node sent to the backend of a stale_backend finding, by service "+
		"(capped; the rest under service=\"_other\").",
	[]string{"namespace", "service"}, nil)

// Describe implements prometheus.Collector.
func (c *Conns) Describe(ch chan<- *prometheus.Desc) { ch <- connsDesc }

// Collect implements prometheus.Collector.
func (c *Conns) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range c.perService {
		ch <- prometheus.MustNewConstMetric(connsDesc, prometheus.CounterValue, float64(n), k.Namespace, k.Name)
	}
}
