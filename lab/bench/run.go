package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/netdrift/netdrift/lab/labenv"
	"github.com/netdrift/netdrift/lab/scenarios"
)

// drainSettle is the least a drain waits after a window: the last change
// written may not have reached the agent's watch yet.
const drainSettle = time.Second

// Modes are the datapath modes a run can measure. Proxy is the command
// name of the node's service proxy: kube-proxy, or in cilium mode Cilium's
// own load-balancer control plane (lab/cilium), which the lab runs in
// kube-proxy's place.
var Modes = map[string]struct{ ProxyMode, Backend, AgentDatapath, Short, Proxy string }{
	"nftables":        {"nftables", "", "nftables", "nft", "kube-proxy"},
	"iptables-nft":    {"iptables", "nft", "iptables", "iptnft", "kube-proxy"},
	"iptables-legacy": {"iptables", "legacy", "iptables", "iptleg", "kube-proxy"},
	"cilium":          {"cilium", "", "cilium", "cil", "cilium-lb"},
}

// isCilium: the mode without kube-proxy, whose metrics, sync log and
// nf_tables commits the harness cannot use.
func isCilium(mode string) bool { return mode == "cilium" }

// Config is one run: a mode at a scale, with churn windows at Rates.
type Config struct {
	Mode                string // a key of Modes
	Endpoints           int    // total endpoints (Services = Endpoints / EndpointsPerService)
	EndpointsPerService int    // default 10
	Rates               []float64
	Window              time.Duration // each churn window
	Idle                time.Duration // the quiet window
	SyncTimeout         time.Duration // bound on kube-proxy's first sync and the agent's start-up
	Drain               time.Duration // after a window: wait this long at most for pending changes
	// ProxyDuringCreate keeps kube-proxy running while the objects are
	// created (it then builds its table in many partial syncs). Otherwise
	// it is stopped meanwhile and started afterwards, and its start-up to
	// the first full sync is measured. Default (ProxyStart ""): running for
	// iptables-nft, whose one-transaction restore of a whole 100k-endpoint
	// table ran for more than 6 minutes of CPU here; stopped otherwise.
	ProxyStart string // "", "running" or "stopped"
	Agent      string // the netdrift binary
	AgentArgs  []string
	AgentEnv   []string // the agent's extra environment (KEY=VALUE)
	// OfflineRuns: run `netdrift diff` this many times on the reference
	// dump and a cluster file listed from the API, before the agent starts
	// (0: not at all).
	OfflineRuns int
	// OfflineKeep: when set, the offline diff's two inputs are kept in
	// OfflineKeep/<mode>-<scale>/ (cluster.json, dump) for profiling.
	OfflineKeep string
	LabName     string
	// SoakEvery: sample both processes' RSS, the agent's goroutines and
	// findings this often over the churn windows (0: not at all).
	SoakEvery time.Duration
	Logf      func(format string, args ...any)
}

func (c *Config) defaults() error {
	if _, ok := Modes[c.Mode]; !ok {
		return fmt.Errorf("mode %q: want nftables, iptables-nft, iptables-legacy or cilium", c.Mode)
	}
	if c.EndpointsPerService == 0 {
		c.EndpointsPerService = 10
	}
	if c.Endpoints < c.EndpointsPerService {
		return fmt.Errorf("endpoints %d: want at least %d", c.Endpoints, c.EndpointsPerService)
	}
	if c.Window == 0 {
		c.Window = 60 * time.Second
	}
	if c.Idle == 0 {
		c.Idle = 30 * time.Second
	}
	if c.SyncTimeout == 0 {
		c.SyncTimeout = 30 * time.Minute
	}
	switch c.ProxyStart {
	case "":
		c.ProxyStart = "stopped"
		if c.Mode == "iptables-nft" {
			c.ProxyStart = "running"
		}
	case "running", "stopped":
	default:
		return fmt.Errorf("proxy start %q: want running or stopped", c.ProxyStart)
	}
	if c.Drain == 0 {
		c.Drain = 2 * time.Minute
	}
	if c.LabName == "" {
		c.LabName = "bl" + Modes[c.Mode].Short
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// Window is one measured window.
type Window struct {
	Name         string
	Rate         float64 // changes per second asked (0: idle)
	Took         time.Duration
	LoadStart    string // /proc/loadavg
	LoadEnd      string
	Agent, Proxy CPU
	// WatchOnly: the watchonly reference's CPU (client-go informers on what
	// the agent watches, no-op handlers); zero when it did not run
	WatchOnly       CPU
	AgentLiveKids   int // children still running at the window's end (their CPU so far is counted)
	ProxyLiveKids   int
	Changes         int
	ChangeErrors    int
	Samples         int // lag samples listed by /v1/lag for changes delivered in the window
	SamplesMetric   int // increase of netdrift_node_programming_lag_seconds_count
	Superseded      int // changes the samples say they replaced (the agent's counted reason)
	Dropped         int // increase of netdrift_lag_samples_dropped_total (changes dropped for a counted reason)
	PendingAtEnd    int // the agent's pending changes after the drain
	DrainTook       time.Duration
	ProxySyncs      int // increase of kubeproxy_sync_proxy_rules_duration_seconds_count
	Precision       []time.Duration
	PrecisionNoSync int // samples with no kube-proxy sync to match
	OutsideSync     int // samples whose T2 is outside the sync that programmed them
	AgentT2T0Mean   time.Duration
	AgentT2T0       []time.Duration // every sample's T2 - T0 (samples with a trigger time)
	T2Sources       map[string]int  // samples by t2_source ("": the agent's read dated T2)
	ProxyNetProg    time.Duration   // mean of kubeproxy_network_programming_duration_seconds in the window
	ProxyNetProgN   int
	// ProxyLate: the changes kube-proxy's own histogram says it programmed
	// more than StaleAfter after their trigger time (its
	// kubeproxy_network_programming_duration_seconds, bucket le=StaleAfter):
	// what the agent rightly reports as stale while it lasts.
	ProxyLate      int
	LagPollErrors  []string // failed /v1/lag polls (samples may be missing from the listing)
	MissingChanges []Change // changes of services with fewer samples + supersessions than changes (first 10)
	// The kernel-side reference (the nf_tables listener in the node's namespace).
	MonTables    []string       // the IPv4 tables kube-proxy writes (ProxyTables); nil: no nf_tables events in this mode
	MonRunning   bool           // a monitor ran over the window
	MonMatch     MonitorMatch   // the samples against the commits it read
	MonWorst     []string       // the matched samples farthest from their commit (WorstMatches)
	MonCommits   int            // commits it read from the window's start to the drain's end that touched MonTables
	MonByProcess map[string]int // every commit it read then, by committing process
	MonCPU       time.Duration  // its CPU over the window (counted in neither process)
	MonExited    bool           // it had stopped on an error by the drain's end
	MonOverruns  int            // times the kernel dropped notifications to it (ENOBUFS)
}

// Missing is the changes with neither a sample, a counted supersession nor
// still pending.
// /v1/lag keeps the newest 1,000 samples: when one read converges more
// than that, the listing falls short and the metric is the count.
func (w Window) Missing() int {
	return w.Changes - w.ChangeErrors - max(w.Samples, w.SamplesMetric) - w.Superseded - w.Dropped - w.PendingAtEnd
}

// StaleAfter is the agent's --stale-after in these runs (its default).
const StaleAfter = 5 * time.Second

// RefDump is one reference read of the table in the node's namespace.
type RefDump struct {
	Cmd   string
	CPU   time.Duration // rusage of the child(ren)
	Wall  time.Duration
	Bytes int
	Out   []byte // what it printed (the commands' outputs in order)
}

// Result is one run.
type Result struct {
	Config             Config
	Services           int
	Host               string
	Started            time.Time
	LoadStart          string
	LoadEnd            string
	LabUp              time.Duration
	CreateTook         time.Duration
	ProxySyncedAfter   time.Duration // ProxyStart stopped: kube-proxy's start -> holding every service (its first full sync)
	ProxySyncCPU       CPU           // ProxyStart stopped: kube-proxy's CPU by then
	ProxyCaughtUp      time.Duration // ProxyStart running: last create -> kube-proxy holding every service
	ProxyCreateCPU     CPU           // ProxyStart running: kube-proxy's CPU over creation and catching up
	Refs               []RefDump
	Offline            *OfflineDiff  // netdrift diff of the last reference dump (nil: not run)
	StartupTook        time.Duration // agent start -> ready, zero pending, zero findings
	StartupCPU         CPU
	StartupRSS         int64
	Frontends          float64 // netdrift_frontends{state="observed"} at ready
	Idle               *Window
	Churn              []Window
	AgentMem, ProxyMem Mem
	Monitor            *MonitorStats // the nf_tables listener over the churn windows (nil: none ran)
	WatchOnly          bool          // the watch-only reference ran over the windows
	Soak               []SoakPoint   // Config.SoakEvery's samples over the churn windows
	Notes              []string
	Err                error
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Run measures one configuration. The lab is removed on return, success or
// not; what was measured before an error is in the result.
func Run(ctx context.Context, cfg Config) (res *Result) {
	res = &Result{Config: cfg, Started: time.Now(), LoadStart: loadavg()}
	res.Host, _ = os.Hostname()
	if err := cfg.defaults(); err != nil {
		res.Err = err
		return res
	}
	res.Config = cfg
	logf := cfg.Logf
	m := Modes[cfg.Mode]
	dir := labenv.DefaultDir(cfg.LabName)
	if left := labenv.Leftovers(cfg.LabName, dir); len(left) > 0 {
		logf("removing what a previous run left of lab %s: %v", cfg.LabName, left)
		if err := labenv.Down(cfg.LabName, dir); err != nil {
			res.Err = err
			return res
		}
	}
	l, err := labenv.Start(ctx, labenv.Options{
		Name: cfg.LabName, Dir: dir, Nodes: 1, ProxyMode: m.ProxyMode, IPTablesBackend: m.Backend,
		Agent: cfg.Agent, DeferAgents: true,
		AgentArgs: append([]string{"--datapath=" + m.AgentDatapath}, cfg.AgentArgs...),
		AgentEnv:  cfg.AgentEnv,
		Logf:      logf,
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
	res.Err = run(ctx, l, cfg, res)
	return res
}

const node = "node-1"

func run(ctx context.Context, l *labenv.Lab, cfg Config, res *Result) error {
	logf := cfg.Logf
	pname := Modes[cfg.Mode].Proxy
	proxyPID, err := l.KubeProxyPID(node)
	if err != nil {
		return err
	}
	if c := Comm(proxyPID); c != pname {
		return fmt.Errorf("%s PID %d runs %q", pname, proxyPID, c)
	}
	rc := l.RESTConfig()
	rc.QPS, rc.Burst = 5000, 10000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	hc, err := l.HTTPClient(node)
	if err != nil {
		return err
	}
	hc.Timeout = 30 * time.Second
	var proxy *proxyMetrics // nil: cilium-lb serves no metrics here
	if !isCilium(cfg.Mode) {
		proxy = &proxyMetrics{http: hc}
	}
	var cl *Cluster

	// Objects, created while kube-proxy is stopped (it would re-sync its
	// growing table all along, slowing the API server on a small machine);
	// then kube-proxy's start-up to its first full sync of them, the
	// reference for the agent's start-up.
	res.Services = cfg.Endpoints / cfg.EndpointsPerService
	if cfg.ProxyStart == "running" {
		cpu0, _, _ := ReadTreeCPU(proxyPID)
		if cl, err = createTimed(ctx, cs, cfg, res, logf, "running"); err != nil {
			return err
		}
		logf("created in %s; waiting for %s's sync", res.CreateTook.Round(time.Millisecond), pname)
		t1 := time.Now()
		if err := waitSynced(ctx, l, cfg, proxy, cl, t1, cfg.SyncTimeout); err != nil {
			return fmt.Errorf("%s's sync of %d endpoints: %w", pname, cfg.Endpoints, err)
		}
		res.ProxyCaughtUp = time.Since(t1)
		cpu1, _, _ := ReadTreeCPU(proxyPID)
		res.ProxyCreateCPU = cpu1.Sub(cpu0)
		logf("%s holds every service %s after the last create (CPU over creation %s)", pname, res.ProxyCaughtUp.Round(time.Millisecond), res.ProxyCreateCPU.Total())
	} else {
		if err := l.StopKubeProxy(node); err != nil {
			return err
		}
		if cl, err = createTimed(ctx, cs, cfg, res, logf, "stopped"); err != nil {
			return err
		}
		logf("created in %s; starting %s", res.CreateTook.Round(time.Millisecond), pname)
		t0 := time.Now()
		sctx, cancel := context.WithTimeout(ctx, cfg.SyncTimeout)
		err = l.StartKubeProxy(sctx, node)
		cancel()
		if err != nil {
			return fmt.Errorf("%s's start-up at %d endpoints: %w", pname, cfg.Endpoints, err)
		}
		if proxyPID, err = l.KubeProxyPID(node); err != nil {
			return err
		}
		if err := waitSynced(ctx, l, cfg, proxy, cl, t0, time.Until(t0.Add(cfg.SyncTimeout))); err != nil {
			return fmt.Errorf("%s's first sync of %d endpoints: %w", pname, cfg.Endpoints, err)
		}
		res.ProxySyncedAfter = time.Since(t0)
		res.ProxySyncCPU, _, _ = ReadTreeCPU(proxyPID)
		logf("%s started and holds every service after %s (CPU %s)", pname, res.ProxySyncedAfter.Round(time.Millisecond), res.ProxySyncCPU.Total())
	}

	// The reference read, twice, before the agent runs.
	for k := 0; k < 2; k++ {
		r, err := refDump(ctx, l, cfg.Mode)
		if err != nil {
			return err
		}
		res.Refs = append(res.Refs, r)
		logf("reference %s: CPU %s wall %s (%d bytes)", r.Cmd, r.CPU, r.Wall.Round(time.Millisecond), r.Bytes)
	}
	if cfg.OfflineRuns > 0 {
		od, err := offlineDiff(ctx, cs, cfg, cheapest(res.Refs))
		if err != nil {
			return fmt.Errorf("offline diff of %s's datapath: %w", pname, err)
		}
		res.Offline = &od
		logf("offline diff: CPU %s (runs %v) against %s's %s; cluster file %d bytes", od.Best(), od.CPU, od.Ref.Cmd, od.Ref.CPU, od.ClusterBytes)
	}

	// Agent start-up.
	t1 := time.Now()
	agentPID, err := l.StartAgent(node)
	if err != nil {
		return err
	}
	a := &scenarios.Agent{Node: node, Base: "http://" + l.AgentAddr(node), HTTP: hc}
	if err := waitAgentClean(ctx, a, cfg.SyncTimeout, 100*time.Millisecond); err != nil {
		return fmt.Errorf("agent start-up at %d endpoints (log %s): %w", cfg.Endpoints, l.LogPath("agent/"+node), err)
	}
	res.StartupTook = time.Since(t1)
	res.StartupCPU, _, _ = ReadTreeCPU(agentPID)
	if mem, err := ReadMem(agentPID); err == nil {
		res.StartupRSS = mem.RSS
	}
	if ms, err := a.Metrics(ctx); err == nil {
		res.Frontends, _ = ms.Sum("netdrift_frontends", map[string]string{"state": "observed"})
	}
	logf("agent ready in %s (CPU %s), %.0f frontends observed", res.StartupTook.Round(time.Millisecond), res.StartupCPU.Total(), res.Frontends)
	if want := float64(res.Services); res.Frontends < want {
		res.Notes = append(res.Notes, fmt.Sprintf("agent observed %.0f frontends, fewer than the %d services", res.Frontends, res.Services))
	}

	procs := pids{agent: agentPID, proxy: proxyPID}
	// The API watch's own cost, beside the agent's: the same informers with
	// handlers that do nothing.
	if pid, err := startWatchOnly(ctx, l); err != nil {
		res.Notes = append(res.Notes, "no watch-only reference: "+err.Error())
	} else {
		procs.watch, res.WatchOnly = pid, true
	}
	// Idle.
	time.Sleep(3 * time.Second)
	idle, err := measure(ctx, procs, "idle", cfg.Idle, func(ctx context.Context) { sleepCtx(ctx, cfg.Idle) })
	if err != nil {
		return err
	}
	res.Idle = &idle
	logf("idle %s: agent %s, %s %s", cfg.Idle, idle.Agent.Total(), pname, idle.Proxy.Total())

	// The kernel-side reference over the churn windows (not the idle one).
	var mon *Monitor
	if ProxyTables(cfg.Mode) != nil && len(cfg.Rates) > 0 {
		mon, err = startMonitor(l, logf)
		if err != nil {
			res.Notes = append(res.Notes, "no nf_tables listener reference: "+err.Error())
			mon = nil
		}
	}
	if mon != nil {
		defer func() {
			st := mon.Stop()
			res.Monitor = &st
			if st.Err != nil {
				res.Notes = append(res.Notes, st.Err.Error())
			}
		}()
	}

	if cfg.SoakEvery > 0 {
		var v *staleVerifier
		if ProxyTables(cfg.Mode) != nil { // kube-proxy's rules: the findings can be checked
			v = &staleVerifier{lab: l, mode: cfg.Mode, agent: a, mon: mon}
		}
		soak := startSoak(ctx, cfg.SoakEvery, a, procs, v)
		defer func() { res.Soak = soak.Stop() }()
	}
	cursor := 0
	for _, rate := range cfg.Rates {
		if err := waitAgentClean(ctx, a, cfg.Drain, 500*time.Millisecond); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("before the %g/s window the agent was not converged: %v", rate, err))
		}
		w, err := churnWindow(ctx, cfg, procs, a, proxy, l, cs, cl, mon, rate, &cursor)
		res.Churn = append(res.Churn, w)
		if err != nil {
			return err
		}
		logf("churn %g/s: %d changes, agent %s, %s %s, %d samples, %d superseded, %d pending, %d missing; T2-T0 p50/p99 %s",
			rate, w.Changes, w.Agent.Total(), pname, w.Proxy.Total(), w.Samples, w.Superseded, w.PendingAtEnd, w.Missing(), t2t0Quantiles(w))
	}
	res.AgentMem, _ = ReadMem(agentPID)
	res.ProxyMem, _ = ReadMem(proxyPID)
	return nil
}

type pids struct{ agent, proxy, watch int } // watch: 0 when watchonly does not run

// startWatchOnly starts the watchonly reference in the node's namespace and
// waits until its caches synced (it prints so).
func startWatchOnly(ctx context.Context, l *labenv.Lab) (int, error) {
	pid, err := l.StartWatchOnly(node)
	if err != nil {
		return 0, err
	}
	log := l.LogPath("watchonly/" + node)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		if b, _ := os.ReadFile(log); bytes.Contains(b, []byte("caches synced")) {
			return pid, nil
		}
		sleepCtx(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	return 0, fmt.Errorf("watchonly did not sync its caches in 2 minutes (log %s)", log)
}

// measure runs fn as a window and reads both processes' CPU at its ends.
func measure(ctx context.Context, p pids, name string, d time.Duration, fn func(context.Context)) (Window, error) {
	w := Window{Name: name, LoadStart: loadavg()}
	a0, _, err := ReadTreeCPU(p.agent)
	if err != nil {
		return w, fmt.Errorf("agent: %w", err)
	}
	k0, _, err := ReadTreeCPU(p.proxy)
	if err != nil {
		return w, fmt.Errorf("service proxy: %w", err)
	}
	var wo0 CPU
	if p.watch != 0 {
		wo0, _, _ = ReadTreeCPU(p.watch)
	}
	start := time.Now()
	fn(ctx)
	if p.watch != 0 {
		if wo1, _, err := ReadTreeCPU(p.watch); err == nil {
			w.WatchOnly = wo1.Sub(wo0)
		}
	}
	a1, ak, err := ReadTreeCPU(p.agent)
	if err != nil {
		return w, fmt.Errorf("agent (died in the window?): %w", err)
	}
	k1, kk, err := ReadTreeCPU(p.proxy)
	if err != nil {
		return w, fmt.Errorf("service proxy (died in the window?): %w", err)
	}
	w.Took = time.Since(start)
	w.AgentLiveKids, w.ProxyLiveKids = ak, kk
	w.Agent, w.Proxy = a1.Sub(a0), k1.Sub(k0)
	w.LoadEnd = loadavg()
	return w, nil
}

func churnWindow(ctx context.Context, cfg Config, p pids, a *scenarios.Agent, proxy *proxyMetrics,
	l *labenv.Lab, cs kubernetes.Interface, cl *Cluster, mon *Monitor, rate float64, cursor *int) (Window, error) {
	am0, err := a.Metrics(ctx)
	if err != nil {
		return Window{}, err
	}
	var pm0 scenarios.Samples
	if proxy != nil {
		if pm0, err = proxy.get(ctx); err != nil {
			return Window{}, err
		}
	}
	collected := map[string]scenarios.LagSample{}
	var changes []Change
	var lagErrs []string
	var mon0 time.Duration
	var over0 int
	if mon != nil {
		mon0, over0 = mon.CPU(), mon.Overruns()
	}
	start := time.Now()
	poll := &lagPoll{start: start, into: collected}
	w, err := measure(ctx, p, fmt.Sprintf("churn %g/s", rate), cfg.Window, func(ctx context.Context) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			changes = cl.Churn(ctx, cs, rate, cfg.Window, cursor)
		}()
		// /v1/lag keeps the newest 1,000 samples: collect as the window runs.
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := poll.collect(ctx, a); err != nil {
					lagErrs = append(lagErrs, err.Error())
				}
			}
		}
	})
	w.Rate = rate
	if err != nil {
		return w, err
	}
	w.Changes = len(changes)
	for _, c := range changes {
		if c.Err != nil {
			w.ChangeErrors++
		}
	}
	// Drain: the last changes converge after the window.
	d0 := time.Now()
	var st scenarios.Status
	lastPoll := time.Now()
	for time.Since(d0) < cfg.Drain {
		// Nothing pending counts only once the last change had time to be
		// delivered: right after the window it may still be in the watch.
		if err := a.Get(ctx, "/v1/status", &st); err == nil && st.PendingChanges == 0 && time.Since(d0) >= drainSettle &&
			accountedFor(ctx, a, am0, collected, w.Changes-w.ChangeErrors) {
			break
		}
		if time.Since(lastPoll) > time.Second {
			_ = poll.collect(ctx, a) // the listing keeps 1,000
			lastPoll = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.DrainTook = time.Since(d0)
	w.PendingAtEnd = st.PendingChanges
	if err := poll.collect(ctx, a); err != nil {
		lagErrs = append(lagErrs, "after the drain: "+err.Error())
	}
	w.LagPollErrors = lagErrs
	end := time.Now()
	w.MonTables = ProxyTables(cfg.Mode)
	var commits []Commit
	if mon != nil {
		w.MonRunning, w.MonExited = true, mon.Exited()
		w.MonCPU, w.MonOverruns = mon.CPU()-mon0, mon.Overruns()-over0
		commits = mon.Commits()
		w.MonByProcess = map[string]int{}
		for _, c := range commits {
			if c.At.Before(start) || c.At.After(end) {
				continue
			}
			w.MonByProcess[c.Process]++
			if c.Touches(w.MonTables) {
				w.MonCommits++
			}
		}
	}

	var samples []scenarios.LagSample
	for _, s := range collected {
		samples = append(samples, s)
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i].T1.Before(samples[j].T1) })
	w.Samples = len(samples)
	var t2t0 time.Duration
	n0 := 0
	w.T2Sources = map[string]int{}
	for _, s := range samples {
		w.T2Sources[s.T2Source]++
		w.Superseded += s.Superseded
		if !s.T0.IsZero() {
			t2t0 += s.T2.Sub(s.T0)
			w.AgentT2T0 = append(w.AgentT2T0, s.T2.Sub(s.T0))
			n0++
		}
	}
	if n0 > 0 {
		w.AgentT2T0Mean = t2t0 / time.Duration(n0)
	}
	if am1, err := a.Metrics(ctx); err == nil {
		c0, _ := am0.Sum("netdrift_node_programming_lag_seconds_count", nil)
		c1, _ := am1.Sum("netdrift_node_programming_lag_seconds_count", nil)
		w.SamplesMetric = int(c1 - c0)
		d0, _ := am0.Sum("netdrift_lag_samples_dropped_total", nil)
		d1, _ := am1.Sum("netdrift_lag_samples_dropped_total", nil)
		w.Dropped = int(d1 - d0)
	}
	if proxy == nil {
		// cilium-lb: no kube-proxy metrics (syncs, network programming).
	} else if pm1, err := proxy.get(ctx); err == nil {
		s0, _ := pm0.Sum("kubeproxy_sync_proxy_rules_duration_seconds_count", v4)
		s1, _ := pm1.Sum("kubeproxy_sync_proxy_rules_duration_seconds_count", v4)
		w.ProxySyncs = int(s1 - s0)
		c0, _ := pm0.Sum("kubeproxy_network_programming_duration_seconds_count", v4)
		c1, _ := pm1.Sum("kubeproxy_network_programming_duration_seconds_count", v4)
		v0, _ := pm0.Sum("kubeproxy_network_programming_duration_seconds_sum", v4)
		v1, _ := pm1.Sum("kubeproxy_network_programming_duration_seconds_sum", v4)
		le := map[string]string{"ip_family": "IPv4", "le": strconv.FormatFloat(StaleAfter.Seconds(), 'f', -1, 64)}
		if b0, ok := pm0.Sum("kubeproxy_network_programming_duration_seconds_bucket", le); ok {
			b1, _ := pm1.Sum("kubeproxy_network_programming_duration_seconds_bucket", le)
			w.ProxyLate = int(c1-c0) - int(b1-b0)
		}
		if w.ProxyNetProgN = int(c1 - c0); w.ProxyNetProgN > 0 {
			w.ProxyNetProg = time.Duration((v1 - v0) / (c1 - c0) * float64(time.Second))
		}
	}
	// Which changes: only when the listing is complete.
	accounted := map[string]int{}
	for _, s := range samples {
		accounted[s.Service] += 1 + s.Superseded
	}
	for _, c := range changes {
		if c.Err != nil {
			continue
		}
		if accounted[c.Service] > 0 {
			accounted[c.Service]--
		} else if len(w.MissingChanges) < 10 && w.Samples >= w.SamplesMetric {
			w.MissingChanges = append(w.MissingChanges, c)
		}
	}
	if isCilium(cfg.Mode) {
		return w, nil // no sync log to match, no nf_tables commit (report_cilium.go)
	}
	// Lag precision against kube-proxy's logged syncs.
	syncs, err := readSyncs(l, start)
	if err != nil {
		return w, err
	}
	for _, s := range samples {
		sy, ok := scenarios.MatchSync(syncs, s.T2, 50*time.Millisecond)
		if !ok {
			w.PrecisionNoSync++
			continue
		}
		d := s.T2.Sub(sy.Complete)
		if s.T2.Before(sy.Start.Add(-10*time.Millisecond)) || d > 100*time.Millisecond {
			w.OutsideSync++
		}
		w.Precision = append(w.Precision, absDur(d))
	}
	// Lag precision against the commits the nf_tables listener read.
	if mon != nil {
		t2s, t1s := make([]time.Time, len(samples)), make([]time.Time, len(samples))
		for i, s := range samples {
			t2s[i], t1s[i] = s.T2, s.T1
		}
		w.MonMatch = MatchSamples(t2s, commits, monitorMatchWindow, w.MonTables)
		w.MonWorst = WorstMatches(t2s, t1s, commits, monitorMatchWindow, w.MonTables, 3)
	}
	return w, nil
}

// accountedFor: the samples counted since the window began (the metric's
// increase over am0) plus the supersessions listed cover want changes. On
// a loaded machine the last changes can still be in the watch when nothing
// is pending yet; the drain then waits for them (up to Config.Drain) rather
// than count them missing.
func accountedFor(ctx context.Context, a *scenarios.Agent, am0 scenarios.Samples, collected map[string]scenarios.LagSample, want int) bool {
	am1, err := a.Metrics(ctx)
	if err != nil {
		return false
	}
	c0, _ := am0.Sum("netdrift_node_programming_lag_seconds_count", nil)
	c1, _ := am1.Sum("netdrift_node_programming_lag_seconds_count", nil)
	got := int(c1 - c0)
	for _, s := range collected {
		got += s.Superseded
	}
	return got >= want
}

// startMonitor binds the nf_tables listener in the node's namespace.
func startMonitor(l *labenv.Lab, logf func(string, ...any)) (*Monitor, error) {
	ns, err := l.NodeNetNS(node)
	if err != nil {
		return nil, err
	}
	mon, err := StartMonitor("/run/netns/" + ns)
	if err != nil {
		return nil, err
	}
	logf("nf_tables listener bound in %s", ns)
	return mon, nil
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// lagPoll collects the /v1/lag samples of changes delivered since start,
// asking each time only for what it has not seen: ?since the newest T1
// collected, or the oldest pending change's T1 when earlier (it may still
// converge). The agent's CPU includes serving these polls.
type lagPoll struct {
	start time.Time
	next  time.Time
	into  map[string]scenarios.LagSample
}

// collect polls once. A busy agent may answer slowly: three attempts.
func (p *lagPoll) collect(ctx context.Context, a *scenarios.Agent) error {
	path := "/v1/lag"
	if !p.next.IsZero() {
		path += "?since=" + url.QueryEscape(p.next.Format(time.RFC3339Nano))
	}
	var lag scenarios.Lag
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = a.Get(ctx, path, &lag); err == nil {
			break
		}
	}
	if err != nil {
		return err
	}
	next := p.next
	for _, s := range lag.Samples {
		if s.T1.Before(p.start) || !strings.HasPrefix(s.Service, Namespace+"/") {
			continue
		}
		p.into[s.Service+"@"+s.T1.Format(time.RFC3339Nano)] = s
		if s.T1.After(next) {
			next = s.T1
		}
	}
	for _, c := range lag.Pending {
		if !c.T1.IsZero() && c.T1.Before(next) {
			next = c.T1
		}
	}
	p.next = next
	return nil
}

func readSyncs(l *labenv.Lab, since time.Time) ([]scenarios.Sync, error) {
	f, err := os.Open(l.LogPath("kube-proxy/" + node))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// kube-proxy syncs each IP family on its own; every change here is IPv4.
	var v4 bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `ipFamily="IPv6"`) {
			v4.Write(sc.Bytes())
			v4.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	all, err := scenarios.ParseSyncs(&v4, since.Year(), time.Local)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy log: %w", err)
	}
	var out []scenarios.Sync
	for _, s := range all {
		if s.Complete.After(since.Add(-time.Minute)) {
			out = append(out, s)
		}
	}
	return out, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

type proxyMetrics struct{ http *http.Client }

// v4 selects kube-proxy's IPv4 series: it runs one proxier per family and
// every figure here is about the IPv4 one.
var v4 = map[string]string{"ip_family": "IPv4"}

func (p *proxyMetrics) get(ctx context.Context) (scenarios.Samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:10249/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return scenarios.ParseMetrics(string(b))
}

// waitProxySynced waits until kube-proxy has no pending service or
// endpoint change, has completed a sync after createdAt, and programs the
// last created service with all its endpoints.
func waitProxySynced(ctx context.Context, l *labenv.Lab, p *proxyMetrics, lastIP string, eps int, createdAt time.Time, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ms, err := p.get(ctx)
		if err == nil {
			ep, _ := ms.Sum("kubeproxy_sync_proxy_rules_endpoint_changes_pending", nil)
			sv, _ := ms.Sum("kubeproxy_sync_proxy_rules_service_changes_pending", nil)
			ts, _ := ms.Sum("kubeproxy_sync_proxy_rules_last_timestamp_seconds", v4)
			last = fmt.Sprintf("pending endpoint changes %.0f, service changes %.0f, last sync %s", ep, sv,
				time.Unix(int64(ts), 0).Format(time.TimeOnly))
			if ep == 0 && sv == 0 && ts > float64(createdAt.Unix()) {
				b, err := l.ProgrammedBackends(node, lastIP, 80)
				if err == nil && len(b) == eps {
					return nil
				}
				last += fmt.Sprintf("; %s:80 programs %d backends (%v)", lastIP, len(b), err)
			}
		} else {
			last = err.Error()
		}
		sleepCtx(ctx, 2*time.Second)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("not within %s: %s", timeout, last)
}

// waitAgentClean waits until the agent is ready with a synced, healthy
// watch, no pending change, no pending mismatch and no finding.
func waitAgentClean(ctx context.Context, a *scenarios.Agent, timeout, every time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		var st struct {
			scenarios.Status
			PendingMismatches int `json:"pending_mismatches"`
		}
		err := a.Get(ctx, "/v1/status", &st)
		if err == nil && st.Ready && st.Watch.Synced && st.Watch.Healthy && st.PendingChanges == 0 &&
			st.PendingMismatches == 0 && st.Findings == 0 {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("ready %v (%s), watch synced %v healthy %v, pending changes %d, pending mismatches %d, findings %d",
				st.Ready, st.ReadyReason, st.Watch.Synced, st.Watch.Healthy, st.PendingChanges, st.PendingMismatches, st.Findings)
		}
		sleepCtx(ctx, every)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("not within %s: %s", timeout, last)
}

// refDump reads the table kube-proxy wrote the way any reader must
// (`nft -j list table ip kube-proxy`, or iptables-save of nat and filter
// with the mode's backend), in the node's namespace, and reports the
// child's CPU from its rusage. In cilium mode: cilium-dbg's listing of the
// node's maps (ciliumRefDump).
func refDump(ctx context.Context, l *labenv.Lab, mode string) (RefDump, error) {
	ns, err := l.NodeNetNS(node)
	if err != nil {
		return RefDump{}, err
	}
	var cmds [][]string
	switch mode {
	case "cilium":
		return ciliumRefDump(l)
	case "nftables":
		cmds = [][]string{{"nft", "-j", "list", "table", "ip", "kube-proxy"}}
	default:
		save := "iptables-" + Modes[mode].Backend + "-save"
		cmds = [][]string{{save, "-t", "nat"}, {save, "-t", "filter"}}
	}
	var r RefDump
	var names []string
	for _, c := range cmds {
		names = append(names, strings.Join(c, " "))
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, c...)...)
		cmd.Stdout = &out
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return r, fmt.Errorf("%s: %v: %s", strings.Join(c, " "), err, stderr.String())
		}
		r.Wall += time.Since(start)
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.CPU += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		r.Bytes += out.Len()
		r.Out = append(r.Out, out.Bytes()...)
	}
	r.Cmd = strings.Join(names, " + ")
	return r, nil
}

// cheapest is the reference run that cost the least CPU: the ratio to it
// is the harder one.
func cheapest(refs []RefDump) RefDump {
	best := refs[0]
	for _, r := range refs[1:] {
		if r.CPU < best.CPU {
			best = r
		}
	}
	return best
}

// createTimed creates the run's objects (the service proxy "running" or
// "stopped" meanwhile) and records how long that took.
func createTimed(ctx context.Context, cs kubernetes.Interface, cfg Config, res *Result, logf func(string, ...any), proxy string) (*Cluster, error) {
	t0 := time.Now()
	logf("creating %d services x %d endpoints (%s %s)", res.Services, cfg.EndpointsPerService, proxyName(cfg.Mode), proxy)
	cl, err := CreateCluster(ctx, cs, res.Services, cfg.EndpointsPerService, 32)
	if err != nil {
		return nil, fmt.Errorf("creating objects: %w", err)
	}
	res.CreateTook = time.Since(t0)
	return cl, nil
}
