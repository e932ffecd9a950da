// Package publish writes the agent's NodeReport to the API server: it builds
// the report from the agent's answers each tick, writes it by Server-Side
// Apply when the write policy says so, backs off on errors, and hands each
// written report to the optional node signals (condition, events). It runs
// in its own goroutine: the agent loop never waits for it.
package publish

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/report"
)

// Writer stores a report (Applier: Server-Side Apply).
type Writer interface {
	Apply(ctx context.Context, r *report.NodeReport) error
}

// Signals are told of every written report: the findings raised and
// cleared since the previous one (Signals.Written), and each tick whatever
// they still have to deliver (Signals.Sync).
type Signals interface {
	Written(ctx context.Context, r report.Report, raised, cleared []api.Finding)
	Sync(ctx context.Context)
}

// Config is a publisher's configuration.
type Config struct {
	Node    string
	Version string
	Policy  report.Policy
	// Inputs are the agent's /v1/status and stale findings, read each tick.
	Inputs func() report.Inputs
	// Lag is /v1/lag's node_lag percentiles and sample count, read per write.
	Lag     func() (map[string]api.Percentiles, int)
	Writer  Writer
	Signals Signals // nil: none
	// Owner is the node's Node object as owner of the report (nil: unknown
	// yet), so that the garbage collector deletes the report of a deleted
	// Node; a new owner (a Node recreated under its name) is a change.
	Owner func() *metav1.OwnerReference
	Clock clock.WithTicker
	Log   *slog.Logger
	// Tick is how often the publisher looks at the agent's answers.
	Tick time.Duration
	// WriteTimeout bounds one write.
	WriteTimeout time.Duration
}

// Publisher publishes one node's report.
type Publisher struct {
	cfg     Config
	last    report.Written
	lastIDs map[string]api.Finding
	backoff wait.Backoff
	retryAt time.Time

	mu     sync.Mutex
	status api.ReportStatus

	writes    *prometheus.CounterVec
	lastWrite prometheus.Gauge
}

// New builds a publisher; Run starts it.
func New(cfg Config) *Publisher {
	if cfg.Tick == 0 {
		cfg.Tick = time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 15 * time.Second
	}
	p := &Publisher{cfg: cfg, status: api.ReportStatus{Enabled: true}}
	p.resetBackoff()
	p.writes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "netdrift_report_writes_total",
		Help: "NodeReport writes (Server-Side Apply) by result: success or error."}, []string{"result"})
	p.writes.WithLabelValues("success")
	p.writes.WithLabelValues("error")
	p.lastWrite = prometheus.NewGauge(prometheus.GaugeOpts{Name: "netdrift_report_last_write_timestamp_seconds",
		Help: "When the NodeReport was last written successfully (Unix time; 0: not yet)."})
	return p
}

// resetBackoff: retries after an error start at 5 s and double up to the
// heartbeat, so that an agent whose writes fail (no CRD installed, no RBAC)
// asks no more often than a healthy one writes.
func (p *Publisher) resetBackoff() {
	limit := p.cfg.Policy.Heartbeat
	if limit < 5*time.Second {
		limit = 5 * time.Second
	}
	p.backoff = wait.Backoff{Duration: 5 * time.Second, Factor: 2, Jitter: 0.2, Steps: 64, Cap: limit}
}

// Collectors are the publisher's metrics.
func (p *Publisher) Collectors() []prometheus.Collector {
	return []prometheus.Collector{p.writes, p.lastWrite}
}

// Status is the publisher's state for /v1/status.
func (p *Publisher) Status() api.ReportStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// Run publishes until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	t := p.cfg.Clock.NewTicker(p.cfg.Tick)
	defer t.Stop()
	for {
		p.Step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Step looks at the agent's answers once and writes the report if it is due
// and no retry is waited for; then lets the signals deliver.
func (p *Publisher) Step(ctx context.Context) {
	defer func() {
		if p.cfg.Signals != nil {
			p.cfg.Signals.Sync(ctx)
		}
	}()
	now := p.cfg.Clock.Now()
	if now.Before(p.retryAt) {
		return
	}
	in := p.cfg.Inputs()
	meta := metav1.ObjectMeta{Name: p.cfg.Node}
	key := report.Key(in)
	if p.cfg.Owner != nil {
		if o := p.cfg.Owner(); o != nil {
			meta.OwnerReferences = []metav1.OwnerReference{*o}
			key += "/owner=" + string(o.UID)
		}
	}
	why, _ := p.cfg.Policy.Due(now, key, p.last)
	if why == report.NotDue {
		return
	}
	r := p.build(in, now)
	wctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
	err := p.cfg.Writer.Apply(wctx, &report.NodeReport{
		TypeMeta:   metav1.TypeMeta{APIVersion: report.APIVersion, Kind: report.Kind},
		ObjectMeta: meta,
		Report:     r,
	})
	cancel()
	if err != nil {
		p.failed(now, err)
		return
	}
	p.succeeded(now, key, why)
	ids := identities(in.Findings)
	raised, cleared := diff(p.lastIDs, ids)
	p.lastIDs = ids
	if p.cfg.Signals != nil {
		p.cfg.Signals.Written(ctx, r, raised, cleared)
	}
}

func (p *Publisher) build(in report.Inputs, now time.Time) report.Report {
	opts := report.Options{AgentVersion: p.cfg.Version, Heartbeat: p.cfg.Policy.Heartbeat,
		MaxFindings: p.cfg.Policy.MaxFindings, Now: now}
	if p.cfg.Lag != nil {
		opts.NodeLag, opts.LagSamples = p.cfg.Lag()
	}
	return report.Build(in, opts)
}

func (p *Publisher) failed(now time.Time, err error) {
	wait := p.backoff.Step()
	p.retryAt = now.Add(wait)
	p.writes.WithLabelValues("error").Inc()
	p.mu.Lock()
	p.status.LastError = err.Error()
	p.mu.Unlock()
	p.cfg.Log.Warn("node report: write failed", "node", p.cfg.Node, "err", err, "retry_in", wait.Round(time.Second))
}

func (p *Publisher) succeeded(now time.Time, key string, why report.Reason) {
	p.last = report.Written{Key: key, At: now}
	p.retryAt = time.Time{}
	p.resetBackoff()
	p.writes.WithLabelValues("success").Inc()
	p.lastWrite.Set(float64(now.UnixNano()) / 1e9)
	p.mu.Lock()
	p.status.LastWrite, p.status.LastError = now, ""
	p.mu.Unlock()
	p.cfg.Log.Debug("node report written", "node", p.cfg.Node, "reason", string(why))
}

// identities indexes findings by what names them in the change key.
func identities(fs []api.Finding) map[string]api.Finding {
	out := make(map[string]api.Finding, len(fs))
	for _, f := range fs {
		out[report.Identity(f)] = f
	}
	return out
}

// diff is what cur adds to prev (raised) and what it drops (cleared),
// each oldest first.
func diff(prev, cur map[string]api.Finding) (raised, cleared []api.Finding) {
	for id, f := range cur {
		if _, ok := prev[id]; !ok {
			raised = append(raised, f)
		}
	}
	for id, f := range prev {
		if _, ok := cur[id]; !ok {
			cleared = append(cleared, f)
		}
	}
	return report.OldestFirst(raised), report.OldestFirst(cleared)
}
