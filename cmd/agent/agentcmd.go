package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/cli"
	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/datapath/cilium"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/rst"
	"github.com/netdrift/netdrift/internal/runtimetune"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// agentFlags is the agent's whole configuration (no package globals).
type agentFlags struct {
	nodeName         string
	kube             cli.KubeConfig
	listen           string
	secureListen     string
	pprofListen      string
	tlsCert, tlsKey  string
	datapath         string
	netns            string
	bpffs            string
	ciliumTopology   bool
	ciliumStamp      string
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
	watchNodes       string
	logLevel         string
	procPath         string
	report           reportFlags
}

// register adds the agent's flags, kubectl's client flags among them
// (--kubeconfig, --context, --server ...; not --disable-compression: the
// agent has --api-compression, off by default). A word in backquotes is
// the placeholder help shows for the value.
func (f *agentFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's `NAME` (default $NODE_NAME)")
	kube := cli.ClientFlags()
	kube.DisableCompression = nil
	f.kube = cli.AddKubeFlags(fs, kube)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:9760", "plain HTTP API and /metrics address (keep it local)")
	fs.StringVar(&f.secureListen, "secure-listen", "", "TLS `ADDRESS` authenticated by TokenReview + SubjectAccessReview (e.g. :9761)")
	fs.StringVar(&f.pprofListen, "pprof-listen", "", "serve Go runtime profiles (/debug/pprof/) on this loopback `ADDRESS`, e.g. 127.0.0.1:9762 (default off)")
	fs.StringVar(&f.tlsCert, "tls-cert-file", "", "certificate `FILE` (PEM) for --secure-listen (default: self-signed, for the node's name and addresses)")
	fs.StringVar(&f.tlsKey, "tls-key-file", "", "key `FILE` (PEM) for --secure-listen")
	fs.StringVar(&f.datapath, "datapath", "auto", "`MODE`: auto, iptables, nftables, ipvs or cilium (Cilium's kube-proxy replacement)")
	fs.BoolVar(&f.ciliumTopology, "cilium-service-topology", false, "cilium mode: cilium-agent runs with enable-service-topology (it honours topology hints; off by default in Cilium)")
	fs.StringVar(&f.ciliumStamp, "cilium-write-stamp", "fexit", "cilium mode: how lag samples are dated by the kernel's stamp of writes to Cilium's maps: "+
		"fexit (fexit programs on the hash map's writes; where the kernel refuses them, reads date the changes), "+
		"auto (fexit, else the system-call tracepoints, which every system call of the node pays for), off (date by the reads)")
	fs.StringVar(&f.bpffs, "bpffs", "", "the bpf filesystem `DIR` Cilium pins its service maps in (default: the first bpf mount, as Cilium's tools find it)")
	fs.StringVar(&f.netns, "netns", "", "read the datapath in the named network namespace `NAME` (tests, lab)")
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
	fs.IntVar(&f.maxServiceSeries, "max-service-series", 100, "cap on per-service metric series (the rest under service=_other)")
	fs.DurationVar(&f.rstWindow, "rst-window", 2*time.Minute, "keep watching a deleted pod's IP for RSTs this long")
	fs.StringVar(&f.rstMode, "rst-probe-mode", "", "force the RST probe `MODE`: auto, tracepoint, tp_btf or fentry")
	fs.BoolVar(&f.noRST, "no-rst-probe", false, "do not load the eBPF RST probe")
	fs.StringVar(&f.clusterCIDRs, "cluster-cidr", "", "pod network `CIDRs`, comma separated (default: from Node podCIDRs)")
	fs.StringVar(&f.routeMode, "route-mode", "auto", "pod route layout `MODE`: auto, per-node or none")
	fs.DurationVar(&f.nodeGoneAfter, "node-gone-after", 5*time.Minute, "a node NotReady this long counts as gone")
	fs.StringVar(&f.watchNodes, "watch-nodes", "all", "`WHICH` Node objects to watch: all (needed by the route and missing-node checks) or own "+
		"(this node's only, as kube-proxy: the API server sends one Node's updates instead of the cluster's; those checks are skipped)")
	fs.StringVar(&f.procPath, "proc-path", "/proc", "host /proc `DIR` (to find pod namespaces behind veths; /host/proc in a container)")
	fs.StringVar(&f.logLevel, "log-level", "info", "`LEVEL`: debug, info, warn or error")
	f.report.register(fs)
}

// ownNodeNote is /v1/status's note for --watch-nodes=own.
const ownNodeNote = "--watch-nodes=own: only this node's Node is watched; stale_route, missing_route and " +
	"endpoint_on_missing_node are not checked (they need every node's podCIDRs and readiness)"

// agentCompletions are the values of the agent's enum flags, for shell
// completion.
var agentCompletions = map[string][]string{
	"datapath":       {"auto", "iptables", "nftables", "ipvs", "cilium"},
	"rst-probe-mode": {"auto", "tracepoint", "tp_btf", "fentry"},
	"route-mode":     {"auto", "per-node", "none"},
	"watch-nodes":    {"all", "own"},
	"log-level":      {"debug", "info", "warn", "error"},
}

// newAgentCommand is `netdrift agent`, the per-node daemon.
func newAgentCommand() *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "run the per-node agent (DaemonSet)",
		Long: "Run the per-node agent: it compares the node's datapath with the EndpointSlice watch cache and serves\n" +
			"the API (--listen, --secure-listen) and /metrics. The API client configuration is --kubeconfig (and the\n" +
			"other kubectl client flags), else $KUBECONFIG, else the in-cluster configuration, else ~/.kube/config.",
		Args: cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.ExitCode(runAgent(cmd.Flags(), f, cmd.ErrOrStderr()))
		},
	}
	f.register(cmd.Flags())
	for name, values := range agentCompletions {
		_ = cmd.RegisterFlagCompletionFunc(name, cli.FixedCompletion(values...))
	}
	return cmd
}

// agentSettings are the flags turned into each package's configuration.
type agentSettings struct {
	agent     agent.Config
	nodeCheck nodecheck.Config
	rstMode   rst.Mode
	logLevel  slog.Level
	// ciliumStamp: how the cilium mode's reader stamps map writes
	ciliumStamp cilium.StampMode
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
		if err := api.CheckPprofAddr(f.pprofListen); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, f.report.validate())
	if f.maxServiceSeries < 1 {
		errs = append(errs, errors.New("--max-service-series must be at least 1"))
	}
	var err error
	if st.ciliumStamp, err = cilium.ParseStampMode(f.ciliumStamp); err != nil {
		bad("--cilium-write-stamp", err)
	}
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
	if f.watchNodes != "all" && f.watchNodes != "own" {
		bad("--watch-nodes", fmt.Errorf("%q is not a choice (want all or own)", f.watchNodes))
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

// runAgent runs the agent with its parsed flags (fs: which were given).
func runAgent(fs *pflag.FlagSet, f agentFlags, stderr io.Writer) int {
	st, err := f.settings()
	if err != nil {
		fmt.Fprintln(stderr, "netdrift agent:", err)
		return cli.ExitError
	}
	runtimetune.Procs(f.maxProcs, fs.Changed("max-procs"), os.Getenv)
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

func serveAgent(ctx context.Context, f agentFlags, st agentSettings, log *slog.Logger) error {
	cfg, err := f.kube.Load()
	if err == nil {
		informer.ClientSettings(cfg, "netdrift/"+build().Version, f.apiCompression)
	}
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
	g.Go(func() error { return api.Serve(ctx, "--listen", f.listen, w.handler, nil, log) })
	if f.pprofListen != "" {
		g.Go(func() error { return api.Serve(ctx, "--pprof-listen", f.pprofListen, api.PprofHandler(), nil, log) })
	}
	if f.secureListen != "" {
		h, tlsCfg, err := secureHandler(ctx, f, client, w.handler, log)
		if err != nil {
			return err
		}
		g.Go(func() error { return api.Serve(ctx, "--secure-listen", f.secureListen, h, tlsCfg, log) })
	}
	return g.Wait()
}
