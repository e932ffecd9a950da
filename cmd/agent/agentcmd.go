package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/cli"
	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/rst"
	"github.com/netdrift/netdrift/internal/runtimetune"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// agentFlags is the agent's whole configuration (no package globals).
type agentFlags struct {
	nodeName         string
	kubeconfig       string
	listen           string
	secureListen     string
	pprofListen      string
	tlsCert, tlsKey  string
	datapath         string
	netns            string
	bpffs            string
	ciliumTopology   bool
	staleAfter       time.Duration
	fastPoll         time.Duration
	eventPoll        time.Duration
	fullAudit        time.Duration
	maxProcs         int
	auditInterval    time.Duration
	watchUnhealthy   time.Duration
	apiReconnect     time.Duration
	apiCompression   bool
	maxServiceSeries int
	rstWindow        time.Duration
	rstMode          string
	noRST            bool
	clusterCIDRs     string
	routeMode        string
	nodeGoneAfter    time.Duration
	logLevel         string
	procPath         string
	report           reportFlags
}

func (f *agentFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:9760", "plain HTTP API and /metrics address (keep it local)")
	fs.StringVar(&f.secureListen, "secure-listen", "", "TLS address authenticated by TokenReview + SubjectAccessReview (e.g. :9761)")
	fs.StringVar(&f.pprofListen, "pprof-listen", "", "serve Go runtime profiles (/debug/pprof/) on this loopback address, e.g. 127.0.0.1:9762 (default off)")
	fs.StringVar(&f.tlsCert, "tls-cert-file", "", "certificate for --secure-listen (default: self-signed)")
	fs.StringVar(&f.tlsKey, "tls-key-file", "", "key for --secure-listen")
	fs.StringVar(&f.datapath, "datapath", "auto", "auto, iptables, nftables, ipvs or cilium (Cilium's kube-proxy replacement)")
	fs.BoolVar(&f.ciliumTopology, "cilium-service-topology", false, "cilium mode: cilium-agent runs with enable-service-topology (it honours topology hints; off by default in Cilium)")
	fs.StringVar(&f.bpffs, "bpffs", "", "the bpf filesystem Cilium pins its service maps in (default: the first bpf mount, as Cilium's tools find it)")
	fs.StringVar(&f.netns, "netns", "", "read the datapath in this named network namespace (tests, lab)")
	fs.DurationVar(&f.staleAfter, "stale-after", 5*time.Second, "a mismatch older than this is a stale finding")
	fs.DurationVar(&f.fastPoll, "fast-poll", 100*time.Millisecond, "re-read interval while changes are pending")
	fs.IntVar(&f.maxProcs, "max-procs", 1, "run Go code on at most this many CPUs at once (GOMAXPROCS; $GOMAXPROCS wins over the default); 0: the Go runtime's default (the CPU limit of the container, else the node's CPUs)")
	fs.DurationVar(&f.fullAudit, "full-audit-interval", 5*time.Minute, "full audit (derive the desired state again, read the datapath whole, compare every frontend) at most this often, and never more than 0.5% of a core")
	fs.DurationVar(&f.eventPoll, "event-poll", time.Second, "re-read interval while changes are pending and nf_tables change events flow (each commit triggers a read)")
	fs.DurationVar(&f.auditInterval, "audit-interval", 10*time.Second, "interval of the audits (a datapath read compared with the desired state) when nothing is pending")
	fs.DurationVar(&f.watchUnhealthy, "watch-unhealthy-after", 25*time.Second, "no Lease renewal delivered for this long = watch unhealthy")
	fs.DurationVar(&f.apiReconnect, "api-reconnect-interval", 2*time.Second,
		"while the API server refuses connections, redial list/watch requests this often (±50 % jitter; 0 = client-go's backoff, up to 60 s)")
	fs.BoolVar(&f.apiCompression, "api-compression", false,
		"ask the API server to gzip responses (default off: in the cluster, gzipping every watch frame costs the API server and the agent more CPU than the bytes it saves; turn on over a slow or metered link)")
	fs.IntVar(&f.maxServiceSeries, "max-service-series", 100, "cap on per-service metric series (the rest under service=\"_other\")")
	fs.DurationVar(&f.rstWindow, "rst-window", 2*time.Minute, "keep watching a deleted pod's IP for RSTs this long")
	fs.StringVar(&f.rstMode, "rst-probe-mode", "", "force the RST probe mode: auto, tracepoint, tp_btf or fentry")
	fs.BoolVar(&f.noRST, "no-rst-probe", false, "do not load the eBPF RST probe")
	fs.StringVar(&f.clusterCIDRs, "cluster-cidr", "", "pod network CIDRs, comma separated (default: from Node podCIDRs)")
	fs.StringVar(&f.routeMode, "route-mode", "auto", "pod route layout: auto, per-node or none")
	fs.DurationVar(&f.nodeGoneAfter, "node-gone-after", 5*time.Minute, "a node NotReady this long counts as gone")
	fs.StringVar(&f.procPath, "proc-path", "/proc", "host /proc (to find pod namespaces behind veths; /host/proc in a container)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	f.report.register(fs)
}

// agentSettings are the flags turned into each package's configuration.
type agentSettings struct {
	agent     agent.Config
	nodeCheck nodecheck.Config
	rstMode   rst.Mode
	logLevel  slog.Level
}

// settings validates every flag up front; each error names its flag and
// says what it wants.
func (f *agentFlags) settings() (agentSettings, error) {
	var st agentSettings
	var errs []error
	bad := func(flag string, err error) { errs = append(errs, fmt.Errorf("%s: %w", flag, err)) }
	if f.nodeName == "" {
		errs = append(errs, errors.New("--node-name (or $NODE_NAME) is required"))
	}
	if _, err := datapath.ParseMode(f.datapath); err != nil {
		bad("--datapath", err)
	}
	for name, d := range map[string]time.Duration{"--stale-after": f.staleAfter, "--fast-poll": f.fastPoll, "--event-poll": f.eventPoll, "--full-audit-interval": f.fullAudit,
		"--audit-interval": f.auditInterval, "--watch-unhealthy-after": f.watchUnhealthy,
		"--rst-window": f.rstWindow, "--node-gone-after": f.nodeGoneAfter} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, not %s", name, d))
		}
	}
	if f.maxProcs < 0 {
		errs = append(errs, fmt.Errorf("--max-procs must be 0 (the runtime's default) or positive, not %d", f.maxProcs))
	}
	if f.apiReconnect < 0 {
		errs = append(errs, errors.New("--api-reconnect-interval must not be negative"))
	}
	if f.pprofListen != "" {
		if err := checkPprofAddr(f.pprofListen); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, f.report.validate())
	if f.maxServiceSeries < 1 {
		errs = append(errs, errors.New("--max-service-series must be at least 1"))
	}
	var err error
	if st.rstMode, err = rst.ParseMode(f.rstMode); err != nil {
		bad("--rst-probe-mode", err)
	}
	st.nodeCheck.NodeGoneAfter = f.nodeGoneAfter
	if st.nodeCheck.RouteMode, err = nodecheck.ParseRouteMode(f.routeMode); err != nil {
		bad("--route-mode", err)
	}
	if st.nodeCheck.ClusterCIDRs, err = nodecheck.ParseClusterCIDRs(f.clusterCIDRs); err != nil {
		bad("--cluster-cidr", err)
	}
	if err := st.logLevel.UnmarshalText([]byte(f.logLevel)); err != nil {
		bad("--log-level", fmt.Errorf("%q is not a level (want debug, info, warn or error)", f.logLevel))
	}
	st.agent = agent.DefaultConfig()
	st.agent.NodeName, st.agent.StaleAfter, st.agent.FastPoll = f.nodeName, f.staleAfter, f.fastPoll
	st.agent.EventPoll, st.agent.FullAuditInterval = f.eventPoll, f.fullAudit
	st.agent.AuditInterval, st.agent.WatchUnhealthyAfter = f.auditInterval, f.watchUnhealthy
	return st, errors.Join(errs...)
}

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f agentFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return cli.ExitError
	}
	st, err := f.settings()
	if err != nil {
		fmt.Fprintln(stderr, "netdrift agent:", err)
		return cli.ExitError
	}
	agentProcs(fs, f.maxProcs)
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: st.logLevel}))
	mem, err := runtimetune.Agent(os.Getenv, runtimetune.CgroupRoot)
	if err != nil {
		log.Warn("memory policy", "err", err)
	}
	log.Info("memory policy", "memory_limit_from", mem.LimitFrom, "memory_limit_bytes", mem.MemoryLimit, "gc", mem.GC)
	klog.SetSlogLogger(log) // client-go logs through the same handler: one format on stderr
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serveAgent(ctx, f, st, log); err != nil {
		log.Error("agent stopped", "err", err)
		return cli.ExitError
	}
	return cli.ExitOK
}

// restConfig is the client configuration. Compression is off unless asked
// for: a watch stream that began as a streaming list stays gzipped for its
// whole life, so every delivery is inflated frame by frame, a cost paid on
// every change for bytes that stay inside the cluster network; the control
// plane's own components turn it off for the same reason.
func restConfig(kubeconfig string, compression bool) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, err
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "netdrift/" + version
	cfg.QPS, cfg.Burst = 20, 40
	cfg.DisableCompression = !compression
	return cfg, nil
}

func serveAgent(ctx context.Context, f agentFlags, st agentSettings, log *slog.Logger) error {
	cfg, err := restConfig(f.kubeconfig, f.apiCompression)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	// Every list and watch attempt is recorded below the reconnect
	// transport, which retries refused dials without client-go seeing them:
	// the failures reach the log and the view at once.
	apiHealth := agent.NewAPIHealth(time.Now, log)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return informer.NewReconnectTransport(apiHealth.Transport(rt), f.apiReconnect)
	})
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	st.agent.API = apiHealth.State
	w, err := wireAgent(ctx, f, st, client, log)
	if err != nil {
		return err
	}
	defer w.close()
	g, ctx := errgroup.WithContext(ctx)
	w.start(ctx, g)
	g.Go(func() error { return serveHTTP(ctx, "--listen", f.listen, w.handler, log) })
	if f.pprofListen != "" {
		g.Go(func() error { return serveHTTP(ctx, "--pprof-listen", f.pprofListen, pprofHandler(), log) })
	}
	if f.secureListen != "" {
		h, tlsCfg, err := secureHandler(f, client, w.handler, log)
		if err != nil {
			return err
		}
		g.Go(func() error { return serveTLS(ctx, f.secureListen, h, tlsCfg, log) })
	}
	return g.Wait()
}

// serveHTTP serves h on addr (given by flag) until ctx ends.
func serveHTTP(ctx context.Context, flagName, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", flagName, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	log.Info("serving", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// agentProcs sets GOMAXPROCS: 1 by default. The agent's work is one loop
// fed by watch and change-event goroutines; a second P makes it no faster
// but adds scheduler wake-ups and spinning to every delivery (cost in
// BENCHMARKS.md, "Live"). $GOMAXPROCS wins over the default, --max-procs
// over both; 0 keeps the runtime's choice.
func agentProcs(fs *flag.FlagSet, n int) {
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == "max-procs" })
	if n > 0 && (given || os.Getenv("GOMAXPROCS") == "") {
		runtime.GOMAXPROCS(n)
	}
}
