package main

import (
	"context"
	"log/slog"
	"net/http"

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
	"github.com/netdrift/netdrift/internal/watch"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// wired is the agent with its collaborators, built explicitly.
type wired struct {
	agent   *agent.Agent
	watcher *informer.Watcher
	changes *datapath.ChangeWatcher
	rst     *rstLink
	handler http.Handler
	log     *slog.Logger
}

// wireAgent builds the agent; reconnect (may be nil) reports API server
// reachability in the watch health reason.
func wireAgent(ctx context.Context, f agentFlags, st agentSettings, client kubernetes.Interface, reconnect *informer.ReconnectTransport,
	log *slog.Logger) (*wired, error) {
	w := &wired{log: log}
	clk := clock.RealClock{}
	mode, reason, err := datapath.Resolve(ctx, f.datapath, f.netns)
	if err != nil {
		mode, reason = model.ModeNone, "datapath detection failed: "+err.Error()
	}
	log.Info("datapath", "mode", mode, "reason", reason)
	var src datapath.Reader
	switch {
	case mode != model.ModeNone:
		if src, err = datapath.Open(mode, f.netns); err != nil {
			return nil, err
		}
	case f.datapath == "auto":
		src = datapath.NewRedetect(f.netns, f.auditInterval, clk.Now, reason)
	}
	if mode != model.ModeIPVS {
		// nf_tables events cover kube-proxy's nftables mode and iptables-nft.
		if cw, err := datapath.WatchChanges(ctx, f.netns); err != nil {
			log.Warn("no nftables change events: polling only", "err", err)
		} else {
			w.changes = cw
		}
	}
	rec := metrics.NewRecorder()
	if reconnect != nil {
		st.agent.APIUnreachable = reconnect.Unreachable
	}
	opts := agent.Options{
		Config: st.agent, Clock: clk, Log: log, Mode: mode, Reason: reason,
		Datapath: src, Recorder: rec,
	}
	if w.changes != nil {
		opts.Changes = w.changes.Events()
	}
	nf := agent.NewNodeSource(agent.NodeSourceConfig{Node: f.nodeName, NetNS: f.netns, ProcPath: f.procPath, Check: st.nodeCheck}, clk)
	opts.Extra = []agent.FindingSource{nf}
	w.watcher = informer.NewWatcher(client, f.nodeName, clk, func(ev watch.Event) {
		w.agent.OnEvent(ev)
		if ev.Kind == watch.KindPod {
			w.rst.kick()
		}
	})
	opts.Cluster = w.watcher
	w.agent = agent.New(opts)
	w.rst = newRSTLink(f, st.rstMode, w.agent, w.watcher, log)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(rec.Collectors()...)
	reg.MustRegister(metrics.NewCollector(w.agent.State, version, f.maxServiceSeries), metrics.NewNodeCollector(nf.Info))
	w.rst.register(reg)
	w.handler = api.NewHandler(w.agent.State, reg, w.rst.extras())
	return w, nil
}

func (w *wired) start(ctx context.Context, g *errgroup.Group) {
	w.watcher.Start(ctx)
	g.Go(func() error { return w.agent.Run(ctx) })
	w.rst.start(ctx, g)
}

func (w *wired) close() {
	if w.changes != nil {
		_ = w.changes.Close()
	}
	w.rst.close()
}
