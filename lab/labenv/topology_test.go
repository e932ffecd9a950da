package labenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestTopology builds the lab's namespaces without a control plane: a
// router, two nodes, one pod on node 2 serving HTTP, and checks node 1
// reaches it across the host-gw route; then everything is removed.
func TestTopology(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	name := fmt.Sprintf("t%d", os.Getpid()%1000000)
	t.Cleanup(func() {
		if err := cleanupLab(name, ""); err != nil {
			t.Error(err)
		}
		if left, _ := listNetns(nsPrefix(name)); len(left) > 0 {
			t.Errorf("namespaces left: %v", left)
		}
	})
	if err := setupRouter(name); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if err := setupNode(name, i); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 2; i++ {
		if err := addPodRoutes(name, i, 2); err != nil {
			t.Fatal(err)
		}
	}
	podNS, ip := nsPrefix(name)+"p1", "10.244.2.7"
	if err := setupPodNet(name, 2, podNS, "v1", ip); err != nil {
		t.Fatal(err)
	}
	ln, err := listenIn(podNS, ip+":8080")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: podHandler("default", "p1"), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	for _, from := range []string{nodeNS(name, 1), nodeNS(name, 2), routerNS(name)} {
		c := &http.Client{Transport: &http.Transport{DialContext: DialContextIn(from)}, Timeout: 5 * time.Second}
		resp, err := c.Get("http://" + ip + ":8080/")
		if err != nil {
			t.Fatalf("from %s: %v", from, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "default/p1\n" {
			t.Errorf("from %s: got %q", from, b)
		}
	}
	// Closing the server closes the listener: the next connect is refused.
	_ = srv.Close()
	_, err = DialContextIn(nodeNS(name, 1))(context.Background(), "tcp", ip+":8080")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("connect after close: want connection refused, got %v", err)
	}
	if err := teardownPodNet(name, 2, podNS, "v1"); err != nil {
		t.Fatal(err)
	}
}
