package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/netdrift/netdrift/lab/labenv"
	"github.com/netdrift/netdrift/lab/scenarios"
)

// CostConfig is one run of the watch-cost benchmark: one lab of Nodes
// nodes, Endpoints endpoints, and a churn window of Window at Rate changes
// per second for each entry of Order.
type CostConfig struct {
	Nodes               int
	Endpoints           int
	EndpointsPerService int // default 10
	Rate                float64
	Window              time.Duration
	Order               []int         // component sets, e.g. 0 1 2 1
	Settle              time.Duration // after the components change, before the next window (default 20s)
	// NodeRate: Node status heartbeats patched per second beside the
	// slice churn in every window (round robin over the nodes; 0: none).
	NodeRate     float64
	StartTimeout time.Duration                    // kube-proxies' first sync, agents' readiness (default 10m)
	ProxyMode    string                           // kube-proxy's mode (default nftables)
	Agent        string                           // the netdrift binary
	AgentArgs    []string                         // after --datapath=<mode> --no-rst-probe
	LabName      string                           // default "wc<Nodes>"
	Logf         func(format string, args ...any) `json:"-"`
}

func (c *CostConfig) defaults() error {
	if c.EndpointsPerService == 0 {
		c.EndpointsPerService = 10
	}
	if c.Nodes < 1 || c.Nodes > 50 {
		return fmt.Errorf("nodes %d: want 1..50", c.Nodes)
	}
	if c.Endpoints < c.EndpointsPerService {
		return fmt.Errorf("endpoints %d: want at least %d", c.Endpoints, c.EndpointsPerService)
	}
	if c.Rate <= 0 || c.Window <= 0 || c.NodeRate < 0 {
		return fmt.Errorf("rate %g/s (nodes %g/s) over %s: want positive rates and window (node rate 0 for none)", c.Rate, c.NodeRate, c.Window)
	}
	if _, err := ParseOrder(orderFields(c.Order)); err != nil {
		return err
	}
	if c.Settle == 0 {
		c.Settle = 20 * time.Second
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 10 * time.Minute
	}
	switch c.ProxyMode {
	case "":
		c.ProxyMode = "nftables"
	case "nftables", "iptables":
	default:
		return fmt.Errorf("proxy mode %q: want nftables or iptables", c.ProxyMode)
	}
	if c.LabName == "" {
		c.LabName = fmt.Sprintf("wc%d", c.Nodes)
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

func orderFields(o []int) []string {
	out := make([]string, len(o))
	for i, k := range o {
		out[i] = fmt.Sprint(k)
	}
	return out
}

// Join is the API server's cost while one component set comes up: the N
// kube-proxies or the N agents list and open their watches.
type Join struct {
	Kind      int // the set reached (1: kube-proxies started, 2: agents started)
	Took      time.Duration
	API       time.Duration
	Delta     APICounters // growth of the counters, change of the gauges
	Component string
}

// CostResult is what a watch-cost run measured.
type CostResult struct {
	Config             CostConfig
	Host               string
	Started            time.Time
	LabUp, CreateTook  time.Duration
	Services           int
	APIPID, EtcdPID    int
	Windows            []CostWindow
	Joins              []Join
	LoadStart, LoadEnd string
	Notes              []string
	Err                error `json:"-"`
}

// RunWatchCost runs the benchmark. The lab is removed on return; what was
// measured before an error is in the result.
func RunWatchCost(ctx context.Context, cfg CostConfig) (res *CostResult) {
	res = &CostResult{Config: cfg, Started: time.Now(), LoadStart: loadavg()}
	res.Host, _ = os.Hostname()
	if err := cfg.defaults(); err != nil {
		res.Err = err
		return res
	}
	res.Config = cfg
	dir := labenv.DefaultDir(cfg.LabName)
	if left := labenv.Leftovers(cfg.LabName, dir); len(left) > 0 {
		cfg.Logf("removing what a previous run left of lab %s: %v", cfg.LabName, left)
		if err := labenv.Down(cfg.LabName, dir); err != nil {
			res.Err = err
			return res
		}
	}
	l, err := labenv.Start(ctx, labenv.Options{
		Name: cfg.LabName, Dir: dir, Nodes: cfg.Nodes, ProxyMode: cfg.ProxyMode,
		Agent: cfg.Agent, DeferAgents: true,
		AgentArgs: append([]string{"--datapath=" + cfg.ProxyMode, "--no-rst-probe"}, cfg.AgentArgs...),
		Logf:      cfg.Logf,
	})
	if err != nil {
		res.Err = err
		return res
	}
	defer func() {
		res.LoadEnd = loadavg()
		if err := l.Stop(); err != nil {
			res.Err = errors.Join(res.Err, fmt.Errorf("lab stop: %w", err))
		}
		if left := labenv.Leftovers(cfg.LabName, dir); len(left) > 0 {
			res.Err = errors.Join(res.Err, fmt.Errorf("left over after stop: %v", left))
		}
	}()
	res.LabUp = l.UpTook()
	res.Err = runWatchCost(ctx, l, cfg, res)
	return res
}

// costLab is the run's state: which components run now.
type costLab struct {
	l                   *labenv.Lab
	cfg                 CostConfig
	cs                  kubernetes.Interface
	proxiesOn, agentsOn bool
	apiPID, etcdPID     int
	res                 *CostResult
}

func runWatchCost(ctx context.Context, l *labenv.Lab, cfg CostConfig, res *CostResult) error {
	logf := cfg.Logf
	var err error
	c := &costLab{l: l, cfg: cfg, proxiesOn: true, res: res}
	if c.apiPID, err = labProcPID(l, "kube-apiserver"); err != nil {
		return err
	}
	if c.etcdPID, err = labProcPID(l, "etcd"); err != nil {
		return err
	}
	res.APIPID, res.EtcdPID = c.apiPID, c.etcdPID
	rc := l.RESTConfig()
	rc.QPS, rc.Burst = 5000, 10000
	if c.cs, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	// The objects are created with no kube-proxy running: every one would
	// re-sync its growing table all along.
	if err := c.stopProxies(); err != nil {
		return err
	}
	res.Services = cfg.Endpoints / cfg.EndpointsPerService
	t0 := time.Now()
	cl, err := CreateCluster(ctx, c.cs, res.Services, cfg.EndpointsPerService, 8)
	if err != nil {
		return fmt.Errorf("creating %d services: %w", res.Services, err)
	}
	res.CreateTook = time.Since(t0)
	logf("created %d services x %d endpoints in %s", res.Services, cfg.EndpointsPerService, res.CreateTook.Round(time.Millisecond))
	cursor := 0
	for i, kind := range cfg.Order {
		if err := c.reach(ctx, kind); err != nil {
			return fmt.Errorf("window %d (set %s): %w", i+1, KindNames[kind], err)
		}
		sleepCtx(ctx, cfg.Settle)
		w, err := c.window(ctx, kind, cl, &cursor)
		if err != nil {
			return fmt.Errorf("window %d (set %s): %w", i+1, KindNames[kind], err)
		}
		res.Windows = append(res.Windows, w)
		logf("window %d, set %s: %d changes (%d failed), API server CPU %s (%.1f %% of a core), RSS %s, etcd CPU %s, %0.f watches open",
			i+1, KindNames[kind], w.Changes, w.ChangeErrors, w.API, 100*w.API.Seconds()/w.Took.Seconds(),
			mib(w.APIRSS.Mean), w.Etcd, sumMap(w.After.Watches))
	}
	return nil
}

// labProcPID finds the live process the lab started under name in its
// state file, and checks that the PID runs that binary.
func labProcPID(l *labenv.Lab, name string) (int, error) {
	st, err := labenv.ReadState(l.Dir())
	if err != nil {
		return 0, err
	}
	for i := len(st.Procs) - 1; i >= 0; i-- {
		p := st.Procs[i]
		if p.Name != name || !p.Alive() {
			continue
		}
		if c := Comm(p.PID); c != name {
			return 0, fmt.Errorf("%s PID %d runs %q", name, p.PID, c)
		}
		return p.PID, nil
	}
	return 0, fmt.Errorf("no live %s in lab %s", name, l.Name())
}

// reach stops and starts components until set kind runs.
func (c *costLab) reach(ctx context.Context, kind int) error {
	if c.agentsOn && kind != KindAgents {
		if err := c.eachNode(func(n string) error { return c.l.StopAgent(n) }); err != nil {
			return err
		}
		c.agentsOn = false
	}
	if c.proxiesOn && kind == KindNone {
		if err := c.stopProxies(); err != nil {
			return err
		}
	}
	if !c.proxiesOn && kind != KindNone {
		err := c.join(ctx, KindProxies, "kube-proxies", func() error {
			sctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
			defer cancel()
			return c.eachNode(func(n string) error { return c.l.StartKubeProxy(sctx, n) })
		})
		if err != nil {
			return err
		}
		c.proxiesOn = true
	}
	if !c.agentsOn && kind == KindAgents {
		err := c.join(ctx, KindAgents, "agents", func() error {
			return c.eachNode(func(n string) error { return c.startAgent(ctx, n) })
		})
		if err != nil {
			return err
		}
		c.agentsOn = true
	}
	return nil
}

func (c *costLab) stopProxies() error {
	err := c.eachNode(func(n string) error { return c.l.StopKubeProxy(n) })
	if err == nil {
		c.proxiesOn = false
	}
	return err
}

// eachNode runs fn for every node, four at a time.
func (c *costLab) eachNode(fn func(node string) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 4)
	for _, n := range c.l.Nodes() {
		wg.Add(1)
		sem <- struct{}{}
		go func(node string) {
			defer func() { <-sem; wg.Done() }()
			if err := fn(node); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", node, err))
				mu.Unlock()
			}
		}(n.Name)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startAgent starts node's agent and waits until it is ready with a synced
// watch (every informer has listed and watches).
func (c *costLab) startAgent(ctx context.Context, node string) error {
	if _, err := c.l.StartAgent(node); err != nil {
		return err
	}
	hc, err := c.l.HTTPClient(node)
	if err != nil {
		return err
	}
	a := &scenarios.Agent{Node: node, Base: "http://" + c.l.AgentAddr(node), HTTP: hc}
	deadline := time.Now().Add(c.cfg.StartTimeout)
	last := "no answer"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var st scenarios.Status
		err := a.Get(ctx, "/v1/status", &st)
		if err == nil && st.Ready && st.Watch.Synced {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("ready %v (%s), watch synced %v (%s)", st.Ready, st.ReadyReason, st.Watch.Synced, st.Watch.Reason)
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
	return fmt.Errorf("agent not ready within %s: %s (log %s)", c.cfg.StartTimeout, last, c.l.LogPath("agent/"+node))
}

// join measures the API server while fn brings a component set up.
func (c *costLab) join(ctx context.Context, kind int, component string, fn func() error) error {
	before, err := c.scrape(ctx)
	if err != nil {
		return err
	}
	cpu0, err := ReadCPU(c.apiPID)
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	t0 := time.Now()
	if err := fn(); err != nil {
		return err
	}
	took := time.Since(t0)
	cpu1, err := ReadCPU(c.apiPID)
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	after, err := c.scrape(ctx)
	if err != nil {
		return err
	}
	j := Join{Kind: kind, Took: took, API: cpu1.Sub(cpu0).Self(), Delta: after.Sub(before), Component: component}
	c.res.Joins = append(c.res.Joins, j)
	c.cfg.Logf("%d %s up in %s: API server CPU %s, %0.f LISTs, %0.f watches opened", len(c.l.Nodes()), component,
		took.Round(time.Millisecond), j.API, sumMap(j.Delta.Lists), sumMap(j.Delta.Watches))
	return nil
}

// scrape reads the API server's /metrics through the lab's admin client.
func (c *costLab) scrape(ctx context.Context) (APICounters, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body, err := c.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return APICounters{}, fmt.Errorf("API server /metrics: %w", err)
	}
	s, err := scenarios.ParseMetrics(string(body))
	if err != nil {
		return APICounters{}, fmt.Errorf("API server /metrics: %w", err)
	}
	return APICountersFrom(s), nil
}

// window churns for one window and measures the API server and etcd.
func (c *costLab) window(ctx context.Context, kind int, cl *Cluster, cursor *int) (CostWindow, error) {
	w := CostWindow{Kind: kind, LoadStart: loadavg()}
	var err error
	if w.Before, err = c.scrape(ctx); err != nil {
		return w, err
	}
	a0, err := ReadCPU(c.apiPID)
	if err != nil {
		return w, fmt.Errorf("kube-apiserver: %w", err)
	}
	e0, err := ReadCPU(c.etcdPID)
	if err != nil {
		return w, fmt.Errorf("etcd: %w", err)
	}
	stop := c.beside(ctx, &w)
	start := time.Now()
	changes := cl.Churn(ctx, c.cs, c.cfg.Rate, c.cfg.Window, cursor)
	stop()
	w.Took = time.Since(start)
	a1, aerr := ReadCPU(c.apiPID)
	e1, eerr := ReadCPU(c.etcdPID)
	if err := errors.Join(aerr, eerr); err != nil {
		return w, fmt.Errorf("process gone in the window: %w", err)
	}
	w.API, w.Etcd = a1.Sub(a0).Self(), e1.Sub(e0).Self()
	for _, ch := range changes {
		w.Changes++
		if ch.Err != nil {
			w.ChangeErrors++
		}
	}
	if w.After, err = c.scrape(ctx); err != nil {
		return w, err
	}
	w.LoadEnd = loadavg()
	return w, nil
}

// beside starts what runs beside a window's slice churn: the RSS samples
// and the Node heartbeats. The returned stop ends both and records their
// results in w.
func (c *costLab) beside(ctx context.Context, w *CostWindow) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	rss := make(chan [2]RSSStats, 1)
	go func() { rss <- sampleRSS(ctx, time.Second, c.apiPID, c.etcdPID) }()
	var names []string
	for _, n := range c.l.Nodes() {
		names = append(names, n.Name)
	}
	nodes := make(chan [2]int, 1)
	go func() { m, f := churnNodes(ctx, c.cs, names, c.cfg.NodeRate); nodes <- [2]int{m, f} }()
	return func() {
		cancel()
		r, np := <-rss, <-nodes
		w.APIRSS, w.EtcdRSS = r[0], r[1]
		w.NodePatches, w.NodePatchErrors = np[0], np[1]
	}
}

// sampleRSS reads both processes' RSS every interval until ctx is done.
func sampleRSS(ctx context.Context, every time.Duration, pids ...int) [2]RSSStats {
	var s [2][]int64
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for i, pid := range pids[:2] {
			if m, err := ReadMem(pid); err == nil {
				s[i] = append(s[i], m.RSS)
			}
		}
		select {
		case <-ctx.Done():
			return [2]RSSStats{RSSOf(s[0]), RSSOf(s[1])}
		case <-t.C:
		}
	}
}
