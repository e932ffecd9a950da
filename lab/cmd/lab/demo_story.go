package main

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netdrift/netdrift/lab/labenv"
	"github.com/netdrift/netdrift/lab/scenarios"
)

// rollout: v1 -> v2, one pod at a time, no preStop, while a client on every
// node connects to the ClusterIP in a loop.
func (d *demoRun) rollout(ctx context.Context, cip string) error {
	d.say("Story 1: a rolling update without a preStop hook.\n" +
		"A client on every node connects to " + cip + ":80 in a loop while shop-v1-N is replaced by shop-v2-N.\n" +
		"Each v1 pod closes its listener as soon as it is deleted; until every node's kube-proxy has removed it,\n" +
		"some clients are still sent there: connection refused. netdrift counts the RSTs those pods send\n" +
		"(eBPF probe) and measures how long each node took to remove the endpoint.")
	var fleet scenarios.Fleet
	for _, n := range d.nodes {
		fleet.Clients = append(fleet.Clients, &scenarios.Client{Name: n.name, Dial: labenv.DialContextIn(n.ns),
			Addr: net.JoinHostPort(cip, "80"), Interval: 2 * time.Millisecond, Timeout: time.Second})
	}
	fleet.Start(ctx)
	time.Sleep(time.Second)
	for i, n := range d.nodes {
		if _, err := d.createPod(ctx, fmt.Sprintf("shop-v2-%d", i+1), n.name); err != nil {
			fleet.Stop()
			return err
		}
		if err := d.waitConverged(ctx); err != nil {
			fleet.Stop()
			return err
		}
		old := fmt.Sprintf("shop-v1-%d", i+1)
		fmt.Printf("    shop-v2-%d ready; deleting %s\n", i+1, old)
		if err := d.cs.CoreV1().Pods("default").Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
			fleet.Stop()
			return err
		}
		if err := d.waitGone(ctx, old); err != nil {
			fleet.Stop()
			return err
		}
		time.Sleep(time.Second)
	}
	time.Sleep(time.Second)
	total, per := fleet.Stop()
	fmt.Printf("\n    what the clients saw: %s\n", total)
	for _, n := range d.nodes {
		fmt.Printf("      client on %s: %s\n", n.name, per[n.name])
	}
	time.Sleep(2 * time.Second) // the agents read the probe's counters every 500 ms
	var rsts float64
	for _, n := range d.nodes {
		m, err := d.agentOf(n).Metrics(ctx)
		if err != nil {
			return err
		}
		v, _ := m.Sum("netdrift_terminating_rsts_total", map[string]string{"namespace": "default", "service": "shop"})
		rsts += v
	}
	d.say(fmt.Sprintf("netdrift counted %.0f RSTs from terminating shop pods (summed over the nodes); the clients saw %d refused connections.\n"+
		"Each node's agent counts the resets its own terminating pods sent:", rsts, total.Refused))
	for _, n := range d.nodes {
		d.show(n, "rsts")
	}
	d.say("And how long each node took to program each change (remove = the endpoint left the rules):")
	d.show(d.nodes[0], "lag")
	d.say("Prometheus (" + d.promURL() + ") pages for it at once: NetdriftTerminatingRSTs, with the preStop advice.")
	return d.waitAlert(ctx, "NetdriftTerminatingRSTs", "service", "shop", 60*time.Second)
}

// deaf: a Service whose target port nothing listens on, while its pod is Ready.
func (d *demoRun) deaf(ctx context.Context) error {
	d.say("Story 3: a Ready endpoint that refuses. Service default/deaf targets port 8081 of its pod, which only\n" +
		"listens on 8080 while the pod reports Ready. Clients on every node connect for 3 s.")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "deaf"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "deaf"}, Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(labenv.DefaultPodPort + 1)}}},
	}
	created, err := d.cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if _, err := d.createAppPod(ctx, "deaf-1", d.nodes[0].name, "deaf"); err != nil {
		return err
	}
	if err := d.waitConverged(ctx); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the agents write the endpoint's port into the probe every second
	var fleet scenarios.Fleet
	for _, n := range d.nodes {
		fleet.Clients = append(fleet.Clients, &scenarios.Client{Name: n.name, Dial: labenv.DialContextIn(n.ns),
			Addr: net.JoinHostPort(created.Spec.ClusterIP, "80"), Interval: 5 * time.Millisecond, Timeout: time.Second})
	}
	fleet.Start(ctx)
	time.Sleep(3 * time.Second)
	total, _ := fleet.Stop()
	fmt.Printf("    what the clients saw: %s\n", total)
	d.say("The agent settles a reset as Ready once no deletion request can precede it (15 s), then counts it:")
	time.Sleep(18 * time.Second)
	d.show(d.nodes[0], "rsts")
	return nil
}

// freeze: kube-proxy on node-2 stops (SIGSTOP) while a backend is deleted.
func (d *demoRun) freeze(ctx context.Context) error {
	n := d.nodes[1]
	svc, err := d.cs.CoreV1().Services("default").Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		return err
	}
	cip := svc.Spec.ClusterIP
	d.say(fmt.Sprintf("Story 2: kube-proxy on %s hangs (SIGSTOP pid %d), then shop-v2-3 is deleted.\n"+
		"The other nodes remove its DNAT rule; %s keeps sending clients to a pod that no longer exists.", n.name, n.proxyPID, n.name))
	if err := syscall.Kill(n.proxyPID, syscall.SIGSTOP); err != nil {
		return err
	}
	thawed := false
	defer func() {
		if !thawed {
			_ = syscall.Kill(n.proxyPID, syscall.SIGCONT)
		}
	}()
	frozeAt := time.Now()
	if err := d.cs.CoreV1().Pods("default").Delete(ctx, "shop-v2-3", metav1.DeleteOptions{}); err != nil {
		return err
	}
	a := d.agentOf(n)
	if err := poll(ctx, 30*time.Second, func() (bool, string) {
		var dr scenarios.Drift
		if err := a.Get(ctx, "/v1/drift", &dr); err != nil {
			return false, err.Error()
		}
		for _, f := range dr.Findings {
			if f.Kind == "stale_backend" && f.Service == "default/shop" {
				return true, ""
			}
		}
		return false, "no stale_backend yet"
	}); err != nil {
		return err
	}
	fmt.Printf("    %s reported stale_backend %s after the delete\n", n.name, time.Since(frozeAt).Round(100*time.Millisecond))
	d.show(n, "drift")
	d.show(n, "status")
	d.say(fmt.Sprintf("%s, whose kube-proxy is fine, has no stale_backend. (Any stale_conntrack listed there is the SYNs of\n"+
		"story 1's clients that timed out against deleted v1 pods: conntrack keeps them, SYN_SENT, for up to 2 minutes.)", d.nodes[0].name))
	d.show(d.nodes[0], "drift")
	hurt := scenarios.Fleet{Clients: []*scenarios.Client{{Name: n.name, Dial: labenv.DialContextIn(n.ns),
		Addr: net.JoinHostPort(cip, "80"), Interval: 20 * time.Millisecond, Timeout: 300 * time.Millisecond}}}
	hurt.Start(ctx)
	time.Sleep(3 * time.Second)
	hc, _ := hurt.Stop()
	fmt.Printf("    a client on %s meanwhile: %s (each failure is a connection netdrift counts against the finding)\n", n.name, hc)
	d.say(fmt.Sprintf("NetdriftStaleDNAT waits its `for` (2m) before paging. kube-proxy on %s stays frozen until Prometheus fires it.", n.name))
	if err := d.waitAlert(ctx, "NetdriftStaleDNAT", "node", n.name, 4*time.Minute); err != nil {
		return err
	}
	d.firingNow(ctx)
	d.shootAlerts(ctx)
	d.say(fmt.Sprintf("kube-proxy on %s resumes (SIGCONT) after %s; it syncs and stale_backend clears. (A stale_conntrack\n"+
		"    finding may stay: story 1's timed-out SYNs to deleted pods, which conntrack forgets within 2 minutes.)", n.name,
		time.Since(frozeAt).Round(time.Second)))
	if err := syscall.Kill(n.proxyPID, syscall.SIGCONT); err != nil {
		return err
	}
	thawed = true
	if err := d.waitConverged(ctx); err != nil {
		return err
	}
	d.show(n, "drift")
	d.say("The removal on " + n.name + " took as long as kube-proxy was frozen; netdrift measured it:")
	d.show(n, "lag")
	if err := poll(ctx, time.Minute, func() (bool, string) {
		as, _, err := d.prom().Alerts(ctx)
		return err == nil && len(scenarios.Named(as, "NetdriftStaleDNAT", "")) == 0, "NetdriftStaleDNAT still active"
	}); err != nil {
		return err
	}
	fmt.Println("    NetdriftStaleDNAT resolved in Prometheus.")
	return nil
}

func (d *demoRun) epilogue() {
	n := d.nodes[0]
	if len(d.taken) > 0 {
		fmt.Printf("\n==> Screenshots (headless chromium, Prometheus' own web UI):\n")
		for _, p := range d.taken {
			fmt.Printf("      %s\n", p)
		}
	}
	fmt.Printf(`
==> The lab is still running. Prometheus: %[6]s (alerts: %[6]s%[7]s/alerts). Look around:
      ip netns exec %[1]s %[2]s status --agent http://%[3]s:9760     (also drift, lag, rsts, explain default/shop)
      ip netns exec %[1]s iptables-save -t nat | grep shop
      kubectl --kubeconfig %[4]s get pods,endpointslices -o wide
      logs: %[5]s
    Remove it with: make demo-down
`, n.ns, d.bin, n.ip, d.dir+"/kubeconfig-host", d.dir+"/logs", d.promURL(), uiPath)
}
