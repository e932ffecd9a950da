// Command lab builds and runs the netdrift lab: real etcd, kube-apiserver,
// kube-controller-manager and kube-proxy, with nodes and pods as network
// namespaces.
//
//	lab build                       build the pinned upstream binaries
//	lab up [-name lab] [-nodes 3] [-mode iptables|nftables] [-agent bin/netdrift] [-prometheus]
//	lab status [-name lab]
//	lab down [-name lab]
//	lab demo [-name demo] [-agent bin/netdrift]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = labenv.EnsureBinaries(labenv.DefaultBinDir(), os.Stdout)
	case "up":
		err = up(os.Args[2:])
	case "serve":
		err = serve(os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	case "status":
		err = status(os.Args[2:])
	case "demo":
		err = demo(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: lab build | up [-name N] [-nodes 3] [-mode iptables|nftables] [-agent PATH] | status [-name N] | down [-name N]")
	os.Exit(2)
}

type flags struct {
	name, mode, agent, dir string
	iptablesBackend        string
	nodes                  int
	agentArgs              string
	prometheus             bool
}

func parse(cmd string, args []string) flags {
	var f flags
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	fs.StringVar(&f.name, "name", "lab", "lab name (namespaces ndlab-<name>-*)")
	fs.StringVar(&f.dir, "dir", "", "lab directory (default $TMPDIR/netdrift-lab-<name>)")
	fs.IntVar(&f.nodes, "nodes", 3, "number of nodes")
	fs.StringVar(&f.mode, "mode", "iptables", "kube-proxy mode: iptables or nftables")
	fs.StringVar(&f.iptablesBackend, "iptables-backend", "", "iptables mode: nft or legacy (default: the host's iptables)")
	fs.StringVar(&f.agent, "agent", "", "netdrift binary to run as an agent in every node (optional)")
	fs.StringVar(&f.agentArgs, "agent-args", "", "extra agent flags, space separated")
	fs.BoolVar(&f.prometheus, "prometheus", false, "run Prometheus (scraping agents and kube-proxies, deploy/'s rules) in the router namespace")
	_ = fs.Parse(args)
	if f.dir == "" {
		f.dir = labenv.DefaultDir(f.name)
	}
	if f.agent != "" {
		if abs, err := filepath.Abs(f.agent); err == nil {
			f.agent = abs
		}
	}
	return f
}

// up builds what is missing, then starts "lab serve" detached (it hosts
// the kubelet stand-in and keeps the lab alive) and waits until it is ready.
func up(args []string) error {
	f := parse("up", args)
	if err := labenv.EnsureBinaries(labenv.DefaultBinDir(), os.Stdout); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(f.dir, "logs"), 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(f.dir, "logs", "runner.log")
	lf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer lf.Close()
	cmd := exec.Command(self, append([]string{"serve"}, args...)...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ready := filepath.Join(f.dir, "ready")
	fmt.Printf("lab: starting %q (%d nodes, kube-proxy %s); runner pid %d, log %s\n", f.name, f.nodes, f.mode, cmd.Process.Pid, logPath)
	for {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("runner exited (%v):\n%s", err, out)
		case <-time.After(200 * time.Millisecond):
		}
		if b, err := os.ReadFile(ready); err == nil {
			fmt.Printf("lab: up in %s\n%s", time.Since(start).Round(time.Millisecond), b)
			return nil
		}
	}
}

// serve starts the lab in this process and keeps it until SIGTERM/SIGINT.
func serve(args []string) error {
	f := parse("serve", args)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	opts := labenv.Options{Name: f.name, Dir: f.dir, Nodes: f.nodes, ProxyMode: f.mode, Agent: f.agent,
		IPTablesBackend: f.iptablesBackend, AgentArgs: strings.Fields(f.agentArgs), Prometheus: f.prometheus,
		Logf: func(format string, a ...any) { fmt.Printf(time.Now().Format("15:04:05.000 ")+format+"\n", a...) }}
	l, err := labenv.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() { fmt.Println("stopping lab:", l.Stop()) }()
	if err := l.SetRunner(os.Getpid()); err != nil {
		return err
	}
	addr, err := l.ServeHostAPI(ctx)
	if err != nil {
		return err
	}
	promAddr := ""
	if f.prometheus {
		if promAddr, err = l.ServeHostPrometheus(ctx); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(f.dir, "ready"), []byte(summary(l, addr, promAddr)), 0o644); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func summary(l *labenv.Lab, hostAPI, hostProm string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  api server  %s (router netns %s); host forward https://%s\n", l.APIServerURL(), l.RouterNetNS(), hostAPI)
	if hostProm != "" {
		fmt.Fprintf(&b, "  prometheus  %s (router netns); host forward http://%s\n", l.PrometheusURL(), hostProm)
	}
	fmt.Fprintf(&b, "  kubeconfig  %s (inside the lab), %s (from the host)\n", l.Kubeconfig(), l.HostKubeconfig())
	for _, n := range l.Nodes() {
		fmt.Fprintf(&b, "  %-8s    ip %-11s podCIDR %-14s netns %s\n", n.Name, n.IP, n.PodCIDR, n.NetNS)
	}
	fmt.Fprintf(&b, "  logs        %s\n", filepath.Join(l.Dir(), "logs"))
	fmt.Fprintf(&b, "  look around: ip netns exec %s iptables-save | grep KUBE-SVC\n", l.Nodes()[0].NetNS)
	return b.String()
}

func down(args []string) error {
	f := parse("down", args)
	if err := labenv.Down(f.name, f.dir); err != nil {
		return err
	}
	if left := labenv.Leftovers(f.name, f.dir); len(left) > 0 {
		return errors.New("left over: " + strings.Join(left, ", "))
	}
	fmt.Printf("lab: %q removed\n", f.name)
	return nil
}

func status(args []string) error {
	f := parse("status", args)
	s, err := labenv.ReadState(f.dir)
	if os.IsNotExist(err) {
		fmt.Printf("lab %q: not running\n", f.name)
		if left := labenv.Leftovers(f.name, f.dir); len(left) > 0 {
			fmt.Println("left over:", strings.Join(left, ", "))
		}
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("lab %q: %d nodes, kube-proxy %s, dir %s, host api %s\n", s.Name, s.Nodes, s.ProxyMode, s.Dir, s.HostAPI)
	if s.HostPrometheus != "" {
		fmt.Printf("  prometheus: http://%s\n", s.HostPrometheus)
	}
	for _, p := range append([]*labenv.Proc{s.Runner}, s.Procs...) {
		if p == nil {
			continue
		}
		state := "dead"
		if p.Alive() {
			state = "running"
		}
		fmt.Printf("  %-30s pid %-7d %-7s %s\n", p.Name, p.PID, state, p.NS)
	}
	return nil
}
