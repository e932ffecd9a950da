package main

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/rst"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// rstLink keeps the probe's watched IPs in sync with the watch (pods of this
// node that are terminating, and those deleted within --rst-window) and
// attributes what it counts.
type rstLink struct {
	probe   *rst.Probe
	metrics *rst.Metrics
	agent   *agent.Agent
	watcher *informer.Watcher
	window  time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	targets map[netip.Addr]rst.Target
	gone    map[netip.Addr]time.Time // when the pod disappeared from the cache
	records []rst.Record
	totals  map[string]uint64 // namespace/service -> RSTs
	// kicked asks syncLoop to sync now: a pod of this node changed (it may
	// have started terminating and be closing its listeners this instant).
	kicked chan struct{}
}

const maxRSTRecords = 1000

func newRSTLink(f agentFlags, mode rst.Mode, a *agent.Agent, w *informer.Watcher, log *slog.Logger) *rstLink {
	l := &rstLink{agent: a, watcher: w, window: f.rstWindow, log: log, metrics: rst.NewMetrics(f.maxServiceSeries),
		targets: map[netip.Addr]rst.Target{}, gone: map[netip.Addr]time.Time{}, totals: map[string]uint64{},
		kicked: make(chan struct{}, 1)}
	if f.noRST {
		l.metrics.SetStatus(rst.Status{Mode: rst.ModeNone, Reason: "disabled by --no-rst-probe"})
		return l
	}
	p, err := rst.Load(rst.Config{Mode: mode})
	if err != nil {
		log.Warn("rst probe not loaded; the agent runs without it", "err", err)
	}
	l.probe = p
	l.metrics.SetStatus(p.Status())
	return l
}

func (l *rstLink) register(reg *prometheus.Registry) {
	reg.MustRegister(l.metrics, preStopCollector{l})
}

func (l *rstLink) close() {
	if l.probe != nil {
		_ = l.probe.Close()
	}
}

func (l *rstLink) start(ctx context.Context, g *errgroup.Group) {
	if l.probe == nil || !l.probe.Status().Up {
		return
	}
	g.Go(func() error { l.syncLoop(ctx); return nil })
	g.Go(func() error { l.eventLoop(ctx); return nil })
}

func (l *rstLink) syncLoop(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		l.sync(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.kicked:
		}
	}
}

// kick makes syncLoop watch a pod that starts terminating at once instead of
// on the next tick: the RSTs of a pod that closes its listeners right away
// (no preStop hook) come within milliseconds of its deletion.
func (l *rstLink) kick() {
	select {
	case l.kicked <- struct{}{}:
	default:
	}
}

// sync watches terminating pods' IPs and forgets deleted ones after the window.
func (l *rstLink) sync(now time.Time) {
	if ok, _ := l.watcher.Synced(); !ok {
		return
	}
	current := map[netip.Addr]rst.Target{}
	for _, p := range l.watcher.Pods() {
		if p.DeletionTimestamp == nil {
			continue
		}
		for _, a := range informer.PodIPs(p) {
			current[a] = rst.Target{Namespace: p.Namespace, Pod: p.Name, Deleted: informer.DeletionRequested(p)}
		}
	}
	services := servicesOf(l.agent.State().Desired.Frontends, current)
	l.mu.Lock()
	defer l.mu.Unlock()
	for a, tg := range current {
		if old, ok := l.targets[a]; ok && tg.Service == "" {
			tg.Service = old.Service
		}
		if old, ok := l.targets[a]; ok && !old.Deleted.IsZero() && old.Deleted.Before(tg.Deleted) {
			tg.Deleted = old.Deleted // a later delete (e.g. grace 0) does not move the first one
		}
		if s, ok := services[a]; ok {
			tg.Service = s
		}
		if _, ok := l.targets[a]; !ok {
			if err := l.probe.Watch(a); err != nil {
				l.log.Warn("rst probe: cannot watch", "ip", a, "err", err)
				continue
			}
			l.log.Debug("rst probe: watching a terminating pod", "ip", a, "pod", tg.Namespace+"/"+tg.Pod,
				"since_deletion", now.Sub(tg.Deleted))
		}
		l.targets[a] = tg
		delete(l.gone, a)
	}
	for a := range l.targets {
		if _, ok := current[a]; ok {
			continue
		}
		if _, ok := l.gone[a]; !ok {
			l.gone[a] = now
		}
		if now.Sub(l.gone[a]) > l.window {
			_ = l.probe.Unwatch(a)
			delete(l.targets, a)
			delete(l.gone, a)
		}
	}
	if counts, err := l.probe.Counts(); err == nil {
		l.metrics.Observe(counts, l.tableLocked())
	}
	if st, err := l.probe.Stats(); err == nil {
		l.metrics.SetStats(st)
	}
}

func (l *rstLink) tableLocked() rst.Table {
	t := rst.Table{Addrs: map[netip.Addr]rst.Target{}}
	for a, tg := range l.targets {
		t.Addrs[a] = tg
	}
	return t
}
