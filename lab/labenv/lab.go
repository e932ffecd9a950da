package labenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Lab is a running lab. Its methods are safe for concurrent use.
type Lab struct {
	opts       Options
	pki        pkiFiles
	kubeconfig string
	cfg        *rest.Config
	cs         kubernetes.Interface

	mu      sync.Mutex
	state   State
	procs   map[string]*Proc
	gone    map[int]bool // deleted nodes
	kubelet *kubelet

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped bool
	started time.Time
	upTook  time.Duration
}

// Start builds a lab: namespaces, certificates, control plane, nodes with
// Leases, one kube-proxy (and optionally one netdrift agent) per node, and
// the kubelet stand-in. On error everything created so far is removed.
func Start(ctx context.Context, opts Options) (*Lab, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the lab needs root (network namespaces, iptables)")
	}
	if err := checkBinaries(opts.BinDir); err != nil {
		return nil, err
	}
	if err := checkFree(opts.Name, opts.Dir); err != nil {
		return nil, err
	}
	l := &Lab{
		opts: opts, pki: newPKIFiles(opts.Dir),
		kubeconfig: filepath.Join(opts.Dir, "kubeconfig"),
		procs:      map[string]*Proc{}, gone: map[int]bool{}, started: time.Now(),
		state: State{Name: opts.Name, Dir: opts.Dir, Nodes: opts.Nodes, ProxyMode: opts.ProxyMode},
	}
	if err := l.up(ctx); err != nil {
		serr := l.Stop()
		return nil, errors.Join(err, serr)
	}
	l.upTook = time.Since(l.started)
	l.opts.Logf("lab %s up in %s (%d nodes, kube-proxy %s)", opts.Name, l.upTook.Round(time.Millisecond), opts.Nodes, opts.ProxyMode)
	return l, nil
}

// checkFree refuses to start over a lab that still has namespaces or live
// processes.
func checkFree(name, dir string) error {
	if left, _ := listNetns(nsPrefix(name)); len(left) > 0 {
		return fmt.Errorf("lab %q already has namespaces %v: run `lab down -name %s` first", name, left, name)
	}
	if s, err := ReadState(dir); err == nil {
		for _, p := range append(s.Procs, s.Runner) {
			if p.Alive() {
				return fmt.Errorf("lab %q still runs %s (pid %d): run `lab down -name %s` first", name, p.Name, p.PID, name)
			}
		}
	}
	return nil
}

func (l *Lab) up(ctx context.Context) error {
	o := &l.opts
	for _, d := range []string{o.Dir, filepath.Join(o.Dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := l.saveState(); err != nil {
		return err
	}
	o.Logf("network: router namespace %s, %d nodes", routerNS(o.Name), o.Nodes)
	if err := setupRouter(o.Name); err != nil {
		return err
	}
	for i := 1; i <= o.Nodes; i++ {
		if err := setupNode(o.Name, i); err != nil {
			return err
		}
	}
	for i := 1; i <= o.Nodes; i++ {
		if err := addPodRoutes(o.Name, i, o.Nodes); err != nil {
			return err
		}
	}
	if err := l.setupClient(); err != nil {
		return err
	}
	o.Logf("control plane: etcd, kube-apiserver, kube-controller-manager")
	if err := l.startControlPlane(ctx); err != nil {
		return err
	}
	o.Logf("api server ready after %s", time.Since(l.started).Round(time.Millisecond))
	runCtx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	if err := l.registerNodes(ctx, runCtx); err != nil {
		return err
	}
	if err := l.startNodestreams(ctx); err != nil {
		return err
	}
	l.kubelet = newKubelet(l)
	if err := l.kubelet.run(runCtx, &l.wg); err != nil {
		return err
	}
	o.Logf("kube-proxy (%s) on every node", o.ProxyMode)
	for i := 1; i <= o.Nodes; i++ {
		if err := l.startKubeProxy(i); err != nil {
			return err
		}
	}
	for i := 1; i <= o.Nodes; i++ {
		if err := l.waitKubeProxy(ctx, i, 60*time.Second); err != nil {
			return err
		}
	}
	// Agents start once kube-proxy has written its rules, so they find
	// its datapath mode at startup.
	for i := 1; i <= o.Nodes && !o.DeferAgents; i++ {
		if err := l.startAgent(i); err != nil {
			return err
		}
	}
	if o.Prometheus {
		o.Logf("prometheus: scraping agents and kube-proxies every %s, rules %v", o.ScrapeInterval, o.RuleFiles)
		return l.startPrometheus(ctx)
	}
	return nil
}

func (l *Lab) setupClient() error {
	if err := writePKI(l.pki, []net.IP{net.ParseIP(routerIP), net.ParseIP(kubernetesServiceIP)}); err != nil {
		return err
	}
	if err := writeKubeconfig(l.kubeconfig, apiServerURL(), l.pki); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig)
	if err != nil {
		return err
	}
	cfg.Dial = DialContextIn(routerNS(l.opts.Name))
	cfg.QPS, cfg.Burst = 200, 400
	cfg.Timeout = 15 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	l.cfg, l.cs = cfg, cs
	return nil
}

// start launches a process, records it in the state file and returns it.
func (l *Lab) start(name, ns string, args []string) (*Proc, error) {
	return l.startEnv(name, ns, nil, args)
}

// startEnv is start with extra environment variables.
func (l *Lab) startEnv(name, ns string, env, args []string) (*Proc, error) {
	log := filepath.Join(l.opts.Dir, "logs", sanitize(name)+".log")
	p, err := startProcEnv(name, ns, log, env, args...)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.procs[name] = p
	l.state.Procs = append(l.state.Procs, p)
	l.mu.Unlock()
	return p, l.saveState()
}

func (l *Lab) proc(name string) *Proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.procs[name]
}

func (l *Lab) saveState() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return writeState(&l.state)
}

// SetRunner records the process that keeps the lab alive (lab serve), so
// `lab down` from another process can ask it to stop first.
func (l *Lab) SetRunner(pid int) error {
	l.mu.Lock()
	l.state.Runner = &Proc{Name: "lab-runner", PID: pid, Start: procStart(pid)}
	l.mu.Unlock()
	return l.saveState()
}

// SetHostAPI records the host-loopback address forwarding to the API server.
func (l *Lab) SetHostAPI(addr string) error {
	l.mu.Lock()
	l.state.HostAPI = addr
	l.mu.Unlock()
	return l.saveState()
}

// Stop removes everything the lab created: pods' listeners and namespaces,
// every process it started (by PID), every namespace (with their veths and
// the bridge) and its directory. It is safe to call more than once.
func (l *Lab) Stop() error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return nil
	}
	l.stopped = true
	procs := append([]*Proc(nil), l.state.Procs...)
	l.mu.Unlock()
	if l.cancel != nil {
		l.cancel()
	}
	if l.kubelet != nil {
		l.kubelet.shutdown()
	}
	l.wg.Wait()
	for i := len(procs) - 1; i >= 0; i-- { // reverse start order
		procs[i].stop(5 * time.Second)
	}
	keepLogs(l.opts.Name, l.opts.Dir)
	return cleanupLab(l.opts.Name, l.opts.Dir)
}

// keepLogs copies the lab's logs to $NETDRIFT_LAB_KEEP_LOGS/<name> when
// that is set (a debugging aid: Stop removes the lab directory, also when
// Start fails).
func keepLogs(name, dir string) {
	keep := os.Getenv("NETDRIFT_LAB_KEEP_LOGS")
	if keep == "" || dir == "" {
		return
	}
	dst := filepath.Join(keep, name)
	_ = os.RemoveAll(dst)
	_ = os.MkdirAll(keep, 0o755)
	_ = exec.Command("cp", "-r", filepath.Join(dir, "logs"), dst).Run()
}

// cleanupLab deletes every namespace of the lab and its directory.
func cleanupLab(name, dir string) error {
	var errs []error
	left, err := listNetns(nsPrefix(name))
	errs = append(errs, err)
	for _, ns := range left {
		errs = append(errs, delNetns(ns))
	}
	if dir != "" {
		errs = append(errs, unmountUnder(dir), os.RemoveAll(dir))
	}
	return errors.Join(errs...)
}

func sanitize(s string) string { return strings.ReplaceAll(s, "/", "-") }
