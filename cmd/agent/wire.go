package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/metrics"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/watch"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// datapathSource is a datapath reader that can also use change events.
type datapathSource interface {
	datapath.Source
	ApplyChange(ctx context.Context, ev datapath.ChangeEvent)
}

// wired is the agent with its collaborators, built explicitly.
type wired struct {
	agent   *agent.Agent
	src     datapathSource
	watcher *informer.Watcher
	changes *datapath.ChangeWatcher
	hints   chan time.Time
	rst     *rstLink
	handler http.Handler
	log     *slog.Logger
}

// wireAgent builds the agent; reconnect (may be nil) reports API server
// reachability in the watch health reason.
func wireAgent(ctx context.Context, f agentFlags, client kubernetes.Interface, reconnect *informer.ReconnectTransport,
	log *slog.Logger) (*wired, error) {
	w := &wired{log: log, hints: make(chan time.Time, 1)}
	mode, reason, err := resolveMode(ctx, f.datapath, f.netns)
	if err != nil {
		mode, reason = model.ModeNone, "datapath detection failed: "+err.Error()
	}
	log.Info("datapath", "mode", mode, "reason", reason)
	known := func() model.Desired { return w.agent.State().Desired }
	var src datapathSource
	switch {
	case mode != model.ModeNone:
		if src, err = newSource(mode, f.netns, known); err != nil {
			return nil, err
		}
	case f.datapath == "auto":
		src = &redetectSource{netns: f.netns, known: known, interval: f.auditInterval, detect: datapath.DetectMode,
			reason: reason, last: time.Now()}
	}
	if mode != model.ModeIPVS {
		// nf_tables events cover kube-proxy's nftables mode and iptables-nft.
		if cw, err := datapath.WatchChanges(ctx, f.netns); err != nil {
			log.Warn("no nftables change events: polling only", "err", err)
		} else {
			w.changes = cw
		}
	}
	nodeCfg, err := nodeCheckConfig(f)
	if err != nil {
		return nil, err
	}
	rec := metrics.NewRecorder()
	opts := agent.Options{
		Config: agentConfig(f, reconnect), Clock: clock.RealClock{}, Log: log, Mode: mode, Reason: reason,
		Hints: w.hints, Recorder: rec,
	}
	nf := &nodeFindings{node: f.nodeName, netns: f.netns, procPath: f.procPath, cfg: nodeCfg}
	opts.Extra = []agent.FindingSource{nf}
	if src != nil {
		opts.Datapath = src
		w.src = src
	}
	w.watcher = informer.NewWatcher(client, f.nodeName, clock.RealClock{}, func(ev watch.Event) {
		w.agent.OnEvent(ev)
		if ev.Kind == watch.KindPod {
			w.rst.kick()
		}
	})
	opts.Cluster = w.watcher
	w.agent = agent.New(opts)
	w.rst = newRSTLink(f, w.agent, w.watcher, log)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(rec.Collectors()...)
	reg.MustRegister(metrics.NewCollector(w.agent.State, version, f.maxServiceSeries), nf)
	w.rst.register(reg)
	w.handler = api.NewHandler(w.agent.State, reg, w.rst.extras())
	return w, nil
}

func agentConfig(f agentFlags, reconnect *informer.ReconnectTransport) agent.Config {
	c := agent.DefaultConfig()
	if reconnect != nil {
		c.APIUnreachable = reconnect.Unreachable
	}
	c.NodeName, c.StaleAfter, c.FastPoll, c.AuditInterval = f.nodeName, f.staleAfter, f.fastPoll, f.auditInterval
	c.WatchUnhealthyAfter = f.watchUnhealthy
	return c
}

func nodeCheckConfig(f agentFlags) (nodecheck.Config, error) {
	c := nodecheck.Config{NodeGoneAfter: f.nodeGoneAfter}
	rm, err := nodecheck.ParseRouteMode(f.routeMode)
	if err != nil {
		return c, fmt.Errorf("--route-mode: %w", err)
	}
	c.RouteMode = rm
	for _, s := range strings.Split(f.clusterCIDRs, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return c, fmt.Errorf("--cluster-cidr: %w", err)
		}
		c.ClusterCIDRs = append(c.ClusterCIDRs, p.Masked())
	}
	return c, nil
}

func (w *wired) start(ctx context.Context, g *errgroup.Group) {
	w.watcher.Start(ctx)
	if w.changes != nil {
		g.Go(func() error { w.forwardChanges(ctx); return nil })
	}
	g.Go(func() error { return w.agent.Run(ctx) })
	w.rst.start(ctx, g)
}

// forwardChanges turns nf_tables transactions into read hints for the loop.
func (w *wired) forwardChanges(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.changes.Events():
			if !ok {
				w.log.Warn("nftables change events ended: polling only", "err", w.changes.Err())
				return
			}
			w.log.Debug("datapath changed", "generation", ev.Generation, "process", ev.Process, "pid", ev.PID)
			at := ev.Received
			if at.IsZero() {
				at = time.Now()
			}
			if w.src != nil && !ev.Lost {
				w.src.ApplyChange(ctx, ev)
			}
			select {
			case w.hints <- at:
			default: // a read is already due; it will see this change too
			}
		}
	}
}

func (w *wired) close() {
	if w.changes != nil {
		_ = w.changes.Close()
	}
	w.rst.close()
}

// nodeFindings runs the node-level rules (routes, links, conntrack,
// endpoints on missing nodes) as an agent finding source.
type nodeFindings struct {
	node, netns, procPath string
	cfg                   nodecheck.Config

	mu   sync.Mutex
	info nodecheck.Info
}

func (n *nodeFindings) Name() string { return "node" }

func (n *nodeFindings) Findings(ctx context.Context, cs *watch.ClusterState, desired model.Desired) ([]model.Finding, error) {
	in := watch.NodeCheckInputs(n.node, cs)
	in.Desired = desired.Frontends
	snap, err := datapath.NodeStateWith(ctx, datapath.NodeStateConfig{Netns: n.netns, ProcPath: n.procPath})
	if err == nil {
		in.Snapshot = &snap
	}
	f, info := nodecheck.Check(in, n.cfg, time.Now())
	n.mu.Lock()
	n.info = info
	n.mu.Unlock()
	return f, err
}

var staleConntrackDesc = prometheus.NewDesc("netdrift_stale_conntrack_entries",
	"Conntrack entries to a Service frontend whose DNAT backend is no longer valid, by protocol.", []string{"protocol"}, nil)

// Describe implements prometheus.Collector.
func (n *nodeFindings) Describe(ch chan<- *prometheus.Desc) { ch <- staleConntrackDesc }

// Collect implements prometheus.Collector.
func (n *nodeFindings) Collect(ch chan<- prometheus.Metric) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range []model.Protocol{model.TCP, model.UDP} {
		ch <- prometheus.MustNewConstMetric(staleConntrackDesc, prometheus.GaugeValue, float64(n.info.StaleConntrack[p]), string(p))
	}
}
