package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/datapath/node"
	"github.com/netdrift/netdrift/internal/deletions"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/hurt"
	"github.com/netdrift/netdrift/internal/metrics"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/report/publish"
	"github.com/netdrift/netdrift/internal/rst"
	"github.com/netdrift/netdrift/internal/watch"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// wired is the agent with its collaborators, built explicitly.
type wired struct {
	agent   *agent.Agent
	watcher *informer.Watcher
	changes *datapath.ChangeWatcher
	notes   []string // degraded modes known at start, for /v1/status
	// fallbacks known at start: no change events (polling), events dated when read
	fallbacks []agent.Fallback
	rst       *rst.Pipeline
	hurt      *hurt.Conns
	netns     string
	handler   http.Handler
	log       *slog.Logger
	report    *publish.Publisher // nil: --node-report off
}

// wireAgent builds the agent.
func wireAgent(ctx context.Context, f agentFlags, st agentSettings, client kubernetes.Interface, log *slog.Logger) (*wired, error) {
	w := &wired{log: log}
	clk := clock.RealClock{}
	mode, reason, err := datapath.ResolveWithCilium(ctx, f.datapath, f.netns, f.bpffs)
	if err != nil {
		mode, reason = model.ModeNone, "datapath detection failed: "+err.Error()
	}
	if mode == model.ModeIPTables {
		var note, summary string
		reason, note, summary = iptables.CommandsReason(reason)
		log.Info("iptables commands", "commands", summary)
		if note != "" {
			w.notes = append(w.notes, note)
		}
	}
	log.Info("datapath", "mode", mode, "reason", reason)
	var src datapath.Reader
	switch {
	case mode == model.ModeCilium:
		src = datapath.OpenCiliumStamped(f.bpffs, st.ciliumStamp)
	case mode != model.ModeNone:
		if src, err = datapath.Open(mode, f.netns); err != nil {
			return nil, err
		}
	case f.datapath == "auto":
		src = datapath.NewRedetect(f.netns, f.auditInterval, clk.Now, reason)
	}
	if mode != model.ModeIPVS && mode != model.ModeCilium {
		// nf_tables events cover kube-proxy's nftables mode and iptables-nft.
		if cw, err := datapath.WatchChanges(ctx, f.netns); err != nil {
			log.Warn("no nftables change events: polling only", "err", err)
			w.fallbacks = append(w.fallbacks, agent.Fallback{Reader: agent.FallbackChangeEvents, From: "events", To: "polling",
				Reason: err.Error(), Since: clk.Now()})
		} else {
			w.changes = cw
			if kernel, _, _, derr := cw.Dating(); kernel {
				log.Info("nftables change events dated by the kernel (socket filter on the event socket)")
			} else {
				note := nfevents.DatingNote(derr)
				w.notes = append(w.notes, note)
				w.fallbacks = append(w.fallbacks, agent.Fallback{Reader: agent.FallbackChangeEvents, From: "kernel time",
					To: "read time", Reason: fmt.Sprint(derr), Since: clk.Now()})
				log.Warn(note)
			}
		}
	}
	rec := metrics.NewRecorder()
	opts := agent.Options{
		Config: st.agent, Clock: clk, Log: log, Mode: mode, Reason: reason,
		Datapath: src, Recorder: rec, Semantics: datapath.Semantics(mode, f.ciliumTopology),
	}
	if w.changes != nil {
		opts.Changes, opts.Commits = w.changes.Events(), w.changes
	}
	opts.Notes, opts.Fallbacks = slices.Clone(w.notes), w.fallbacks
	nf := agent.NewNodeSource(agent.NodeSourceConfig{Node: f.nodeName, NetNS: f.netns, ProcPath: f.procPath, Check: st.nodeCheck}, clk)
	opts.NodeSources = []agent.FindingSource{nf}
	// One registry of pod deletions: the agent records each delivery into
	// it (OnEvent, before OnPod reads it), the RST pipeline only reads it.
	opts.PodDeletions = deletions.New(0)
	w.rst = rstPipeline(f, st.rstMode, func() rst.EndpointIndex { return w.agent }, opts.PodDeletions, log)
	var watchOpts []informer.Option
	if f.watchNodes == "own" {
		watchOpts = append(watchOpts, informer.OwnNodeOnly())
		opts.Notes = append(opts.Notes, ownNodeNote)
	}
	w.watcher = informer.NewWatcher(client, f.nodeName, clk, func(ev watch.Event) {
		w.agent.OnEvent(ev)
		if ev.Kind == watch.KindPod {
			w.rst.OnPod(rst.PodChange{Name: ev.Name, IPs: ev.PodIPs, Deleted: ev.Deleted, HostNetwork: ev.PodHostNetwork, At: ev.At})
		}
	}, watchOpts...)
	opts.Cluster = w.watcher
	w.agent = agent.New(opts)

	reg := prometheus.NewRegistry()
	// The Go runtime's metrics, and its live heap (go_gc_heap_live_bytes:
	// what the last GC kept, the figure that tells a leak from garbage).
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(rec.Collectors()...)
	reg.MustRegister(metrics.NewCollector(w.agent.SummaryState, build().Version, f.maxServiceSeries), metrics.NewNodeCollector(nf.Info))
	reg.MustRegister(rst.NewMetrics(w.rst, f.maxServiceSeries), metrics.NewPreStop(w.agent.SummaryState))
	// New connections to stale backends: fed by conntrack NEW events (start).
	w.hurt = hurt.New(func() (stale, pending []drift.Tracked) { return w.agent.Findings() }, clk.Now, 0, f.maxServiceSeries)
	w.netns = f.netns
	reg.MustRegister(w.hurt)
	if w.report = f.report.publisher(ctx, f.nodeName, w.agent, w.watcher.Node, client, log); w.report != nil {
		reg.MustRegister(w.report.Collectors()...)
	}
	w.handler = api.NewHandler(w.agent.State, reg, api.Providers{RSTs: w.rst, Hurt: w.hurt, Lag: w.agent.LagState, Summary: w.agent.SummaryState,
		Report: reportStatus(w.report)})
	return w, nil
}

func (w *wired) start(ctx context.Context, g *errgroup.Group) {
	w.watcher.Start(ctx)
	g.Go(func() error { return w.agent.Run(ctx) })
	g.Go(func() error { w.rst.Run(ctx); return nil })
	if w.report != nil {
		g.Go(func() error { w.report.Run(ctx); return nil })
	}
	g.Go(func() error {
		err := node.WatchConntrackNew(ctx, w.netns, func(fl model.Flow) { w.hurt.Observe(fl) })
		if err != nil && ctx.Err() == nil {
			w.log.Warn("no conntrack NEW events: connections to stale backends are not counted", "err", err)
		}
		return nil
	})
}

func (w *wired) close() {
	if w.changes != nil {
		_ = w.changes.Close()
	}
	_ = w.rst.Close()
}

// rstPipeline loads the RST probe in mode (unless --no-rst-probe) under the
// agent's RST pipeline, which attributes resets to services by the agent's
// index of the desired endpoints on this node.
func rstPipeline(f agentFlags, mode rst.Mode, index func() rst.EndpointIndex, dels rst.Deletions, log *slog.Logger) *rst.Pipeline {
	var disabled string
	if f.noRST {
		disabled = "disabled by --no-rst-probe"
	}
	return rst.NewPipeline(rst.PipelineConfig{Probe: rst.OpenProbe(mode, disabled, log), Window: f.rstWindow, Log: log,
		Services: rst.IndexedServices(index), Deletions: dels})
}
