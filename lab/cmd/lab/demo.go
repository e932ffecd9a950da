package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/netdrift/netdrift/lab/labenv"
	"github.com/netdrift/netdrift/lab/scenarios"
)

// demo brings up a 3-node lab (iptables mode) with one netdrift agent per
// node and narrates two stories with netdrift's own tables: a rollout
// without preStop (RSTs and removal lag), and kube-proxy frozen on one node
// (a stale DNAT found, then healed). It leaves the lab running; on failure
// or interrupt it removes it.
func demo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	name := fs.String("name", "demo", "lab name")
	agent := fs.String("agent", "bin/netdrift", "the netdrift binary")
	shots := fs.String("screenshots", "", "directory for screenshots of Prometheus' alerts and of each dashboard panel's queries (headless chromium); empty: none")
	_ = fs.Parse(args)
	bin, err := filepath.Abs(*agent)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("netdrift binary: %w (run `make build`)", err)
	}
	dir := labenv.DefaultDir(*name)
	if left := labenv.Leftovers(*name, dir); len(left) > 0 {
		return fmt.Errorf("lab %q already exists (%s): run `make demo-down` first", *name, strings.Join(left, ", "))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d := &demoRun{name: *name, dir: dir, bin: bin, started: time.Now()}
	if *shots != "" {
		if d.shots, err = filepath.Abs(*shots); err != nil {
			return err
		}
		if err := os.MkdirAll(d.shots, 0o755); err != nil {
			return err
		}
		old, _ := filepath.Glob(filepath.Join(d.shots, "*.png"))
		for _, f := range old {
			_ = os.Remove(f)
		}
	}
	err = d.run(ctx)
	if err != nil {
		fmt.Printf("\ndemo failed: %v\nremoving the lab...\n", err)
		if derr := labenv.Down(*name, dir); derr != nil {
			err = errors.Join(err, derr)
		} else if left := labenv.Leftovers(*name, dir); len(left) > 0 {
			err = errors.Join(err, fmt.Errorf("left over: %s", strings.Join(left, ", ")))
		} else {
			fmt.Printf("lab %q removed\n", *name)
		}
	}
	return err
}

type demoNode struct {
	name, ns, ip string
	proxyPID     int
}

type demoRun struct {
	name, dir, bin string
	nodes          []demoNode
	cs             kubernetes.Interface
	promAddr       string    // host-loopback forward to the lab Prometheus
	shots          string    // screenshot directory ("" = none)
	taken          []string  // screenshots written
	started        time.Time // for the graphs' range
}

func (d *demoRun) run(ctx context.Context) error {
	d.say("Bringing up a 3-node lab: real etcd, kube-apiserver, kube-controller-manager and kube-proxy (iptables mode),\n" +
		"nodes and pods as network namespaces, one netdrift agent per node, and Prometheus scraping every agent and\n" +
		"every kube-proxy with deploy/prometheus/netdrift.rules.yml loaded as shipped.")
	if err := up([]string{"-name", d.name, "-nodes", "3", "-mode", "iptables", "-agent", d.bin, "-prometheus",
		"-agent-args", "--stale-after=3s --datapath=iptables"}); err != nil {
		return err
	}
	if err := d.attach(); err != nil {
		return err
	}
	if err := d.waitAgents(ctx); err != nil {
		return err
	}
	cip, err := d.createShop(ctx)
	if err != nil {
		return err
	}
	d.show(d.nodes[0], "status")
	if err := d.rollout(ctx, cip); err != nil {
		return err
	}
	if err := d.deaf(ctx); err != nil {
		return err
	}
	if err := d.freeze(ctx); err != nil {
		return err
	}
	if err := d.shootPanels(ctx); err != nil {
		return err
	}
	d.epilogue()
	return nil
}

// attach reads the lab's state: node namespaces, agent addresses and
// kube-proxy PIDs, and a client through the host-loopback forward.
func (d *demoRun) attach() error {
	s, err := labenv.ReadState(d.dir)
	if err != nil {
		return err
	}
	for i := 1; i <= s.Nodes; i++ {
		n := demoNode{name: fmt.Sprintf("node-%d", i)}
		for _, p := range s.Procs {
			switch p.Name {
			case "agent/" + n.name:
				n.ns = p.NS
				for j, a := range p.Args {
					if a == "--listen" && j+1 < len(p.Args) {
						n.ip, _, _ = net.SplitHostPort(p.Args[j+1])
					}
				}
			case "kube-proxy/" + n.name:
				n.proxyPID = p.PID
			}
		}
		if n.ns == "" || n.ip == "" || n.proxyPID == 0 {
			return fmt.Errorf("lab state: %s lacks an agent or kube-proxy", n.name)
		}
		d.nodes = append(d.nodes, n)
	}
	if s.HostPrometheus == "" {
		return fmt.Errorf("lab state: no Prometheus forward")
	}
	d.promAddr = s.HostPrometheus
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(d.dir, "kubeconfig-host"))
	if err != nil {
		return err
	}
	d.cs, err = kubernetes.NewForConfig(cfg)
	return err
}

func (d *demoRun) agentOf(n demoNode) *scenarios.Agent {
	tr := &http.Transport{DialContext: labenv.DialContextIn(n.ns), DisableKeepAlives: true}
	return &scenarios.Agent{Node: n.name, Base: "http://" + net.JoinHostPort(n.ip, "9760"),
		HTTP: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

func (d *demoRun) waitAgents(ctx context.Context) error {
	for _, n := range d.nodes {
		a := d.agentOf(n)
		if err := poll(ctx, 2*time.Minute, func() (bool, string) {
			var st scenarios.Status
			err := a.Get(ctx, "/v1/status", &st)
			return err == nil && st.Ready && st.Watch.Healthy, fmt.Sprintf("%v %s", err, st.ReadyReason)
		}); err != nil {
			return fmt.Errorf("agent on %s: %w", n.name, err)
		}
	}
	return nil
}

// say prints a narration block.
func (d *demoRun) say(text string) {
	fmt.Printf("\n==> %s\n", strings.ReplaceAll(text, "\n", "\n    "))
}

// show runs the netdrift CLI against node's agent, inside node's namespace.
func (d *demoRun) show(n demoNode, args ...string) {
	full := append(append([]string{}, args...), "--agent", "http://"+net.JoinHostPort(n.ip, "9760"))
	fmt.Printf("\n$ ip netns exec %s netdrift %s\n", n.ns, strings.Join(full, " "))
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.ns, d.bin}, full...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 && args[0] == "drift" {
			fmt.Println("(exit code 1: findings present)")
		} else {
			fmt.Printf("(%v)\n", err)
		}
	}
}

func poll(ctx context.Context, timeout time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %s", timeout, msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (d *demoRun) createShop(ctx context.Context) (string, error) {
	d.say("A Service default/shop with one pod per node (each pod: a namespace, a veth, an HTTP server on :8080).")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "shop"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "shop"}, Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(labenv.DefaultPodPort)}}},
	}
	created, err := d.cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	for i, n := range d.nodes {
		if _, err := d.createPod(ctx, fmt.Sprintf("shop-v1-%d", i+1), n.name); err != nil {
			return "", err
		}
	}
	fmt.Printf("    ClusterIP %s:80 -> shop-v1-1, shop-v1-2, shop-v1-3\n", created.Spec.ClusterIP)
	return created.Spec.ClusterIP, d.waitConverged(ctx)
}

func (d *demoRun) createPod(ctx context.Context, name, node string) (string, error) {
	return d.createAppPod(ctx, name, node, "shop")
}

func (d *demoRun) createAppPod(ctx context.Context, name, node, app string) (string, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "netdrift.io/lab-server",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: labenv.DefaultPodPort, Protocol: corev1.ProtocolTCP}}}}},
	}
	if _, err := d.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	var ip string
	err := poll(ctx, time.Minute, func() (bool, string) {
		p, err := d.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ip = p.Status.PodIP
		return ip != "" && p.Status.Phase == corev1.PodRunning, "phase " + string(p.Status.Phase)
	})
	return ip, err
}

// waitConverged waits until no agent has a pending change or a finding
// about the rules. stale_conntrack is left aside: the SYNs of clients that
// timed out against a deleted pod stay in conntrack (SYN_SENT) for up to two
// minutes, and netdrift rightly lists them.
func (d *demoRun) waitConverged(ctx context.Context) error {
	for _, n := range d.nodes {
		a := d.agentOf(n)
		if err := poll(ctx, time.Minute, func() (bool, string) {
			var st scenarios.Status
			var dr scenarios.Drift
			if err := a.Get(ctx, "/v1/status", &st); err != nil {
				return false, err.Error()
			}
			if err := a.Get(ctx, "/v1/drift", &dr); err != nil {
				return false, err.Error()
			}
			for _, f := range append(dr.Findings, dr.Pending...) {
				if f.Kind != "stale_conntrack" {
					return false, f.Kind + ": " + f.Detail
				}
			}
			return st.PendingChanges == 0, fmt.Sprintf("%d pending changes", st.PendingChanges)
		}); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	return nil
}

func (d *demoRun) waitGone(ctx context.Context, name string) error {
	return poll(ctx, 90*time.Second, func() (bool, string) {
		_, err := d.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there"
	})
}
