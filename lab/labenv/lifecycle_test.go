package labenv_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/lab/labenv"
)

// TestLifecycle exercises the Lab controls scenarios rely on: preStop sleep
// keeps the listener open, a frozen kube-proxy does not remove a deleted
// backend until thawed, the API server stops and comes back, and a deleted
// node's namespace and Node object go.
func TestLifecycle(t *testing.T) {
	l := startLab(t, labenv.Options{Nodes: 2, ProxyMode: "iptables"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sel := map[string]string{"app": "life"}
	svc, err := l.CreateService(ctx, labenv.ServiceSpec{Name: "life", Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	cip := svc.Spec.ClusterIP
	ips := map[string]string{}
	for _, p := range []labenv.PodSpec{
		{Name: "slow", Node: "node-1", Labels: sel, PreStop: 2 * time.Second},
		{Name: "fast", Node: "node-2", Labels: sel},
	} {
		if _, err := l.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
		pod, err := l.WaitPodRunning(ctx, "default", p.Name, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ips[p.Name] = pod.Status.PodIP
	}
	both := []string{ips["fast"] + ":8080", ips["slow"] + ":8080"}
	slices.Sort(both)
	waitBackends(t, l, "node-1", cip, both)

	// preStop: the listener stays open during the sleep, then closes.
	start := time.Now()
	if err := l.DeletePod(ctx, "default", "slow", labenv.Grace(10)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := dial(ctx, l, "node-1", ips["slow"]); err != nil {
		t.Fatalf("slow pod refused during its preStop sleep: %v", err)
	}
	if err := l.WaitPodGone(ctx, "default", "slow", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("pod with a 2 s preStop sleep was removed after %s", took)
	}

	// Freeze node-2's kube-proxy, delete "fast": node-1 drops it, node-2 keeps it.
	waitBackends(t, l, "node-2", cip, []string{ips["fast"] + ":8080"})
	if err := l.FreezeKubeProxy("node-2"); err != nil {
		t.Fatal(err)
	}
	if err := l.DeletePod(ctx, "default", "fast", labenv.Grace(0)); err != nil {
		t.Fatal(err)
	}
	waitBackends(t, l, "node-1", cip, nil)
	time.Sleep(2 * time.Second)
	if got, _ := l.ProgrammedBackends("node-2", cip, 80); len(got) != 1 {
		t.Errorf("frozen kube-proxy changed its rules: %v", got)
	}
	if err := l.ThawKubeProxy("node-2"); err != nil {
		t.Fatal(err)
	}
	waitBackends(t, l, "node-2", cip, nil)

	// API server down and back.
	if err := l.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clientset().CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("API answered while stopped")
	}
	if err := l.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}

	// Delete node-2.
	if err := l.DeleteNode(ctx, "node-2"); err != nil {
		t.Fatal(err)
	}
	if n := l.Nodes(); len(n) != 1 || n[0].Name != "node-1" {
		t.Errorf("nodes after delete: %v", n)
	}
	if _, err := l.Exec("node-2", "true"); err == nil {
		t.Error("node-2's namespace still exists")
	}
	if err := l.RemoveNodeRoutes("node-2"); err != nil {
		t.Error(err)
	}
}

func dial(ctx context.Context, l *labenv.Lab, node, ip string) error {
	c, err := l.DialContext(ctx, node, "tcp", net.JoinHostPort(ip, "8080"))
	if err != nil {
		return err
	}
	return c.Close()
}
