package node

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/hurt"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
)

// tcpEcho starts a TCP echo server on addr inside ns.
func tcpEcho(t *testing.T, ns, addr string) {
	t.Helper()
	var ln net.Listener
	if err := inNetns(ns, func() (err error) { ln, err = net.Listen("tcp4", addr); return }); err != nil {
		t.Fatalf("listen tcp %s in %s: %v", addr, ns, err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(c, c) }()
		}
	}()
}

// tcpAsk opens a connection from ns to target, exchanges one message and
// keeps the connection open (ESTABLISHED) until cleanup.
func tcpAsk(t *testing.T, ns, target string) {
	t.Helper()
	var c net.Conn
	if err := inNetns(ns, func() (err error) { c, err = net.DialTimeout("tcp4", target, 3*time.Second); return }); err != nil {
		t.Fatalf("dial tcp %s from %s: %v", target, ns, err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 5)
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatalf("tcp write: %v", err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("tcp echo from %s: %q %v", target, buf, err)
	}
}

// serviceNode builds node a with a client pod (10.77.0.2), two backend pods
// (10.77.0.11, 10.77.0.12) and kube-proxy-like DNAT rules, written with nft
// in a's namespace, that send 10.96.0.10:53/udp and 10.96.0.10:80/tcp to
// backend 1.
func serviceNode(t *testing.T) (a, client, be1 string) {
	l := newNodeLab(t)
	a, client, be1 = l.netns("a"), l.netns("client"), l.netns("be1")
	be2 := l.netns("be2")
	l.forward(a)
	l.ip(a, "route", "add", "blackhole", "10.77.0.0/24")
	l.pod(a, client, "vcl", "10.77.0.2", "10.77.0.1")
	l.pod(a, be1, "vbe1", "10.77.0.11", "10.77.0.1")
	l.pod(a, be2, "vbe2", "10.77.0.12", "10.77.0.1")
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skipf("no nft command: %v", err)
	}
	rules := `table ip nd-svc {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr 10.96.0.10 udp dport 53 dnat to 10.77.0.11:5353
		ip daddr 10.96.0.10 tcp dport 80 dnat to 10.77.0.11:8080
	}
}
`
	cmd := exec.Command("ip", "netns", "exec", a, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("kernel cannot hold an nftables nat chain: %v: %s", err, out)
	}
	for _, be := range []struct{ ns, ip string }{{be1, "10.77.0.11"}, {be2, "10.77.0.12"}} {
		udpEcho(t, be.ns, be.ip+":5353")
		tcpEcho(t, be.ns, be.ip+":8080")
	}
	return a, client, be1
}

var (
	dnsFrontend = model.NewFrontend(netip.MustParseAddr("10.96.0.10"), 53, model.UDP, model.ClusterIP)
	webFrontend = model.NewFrontend(netip.MustParseAddr("10.96.0.10"), 80, model.TCP, model.ClusterIP)
	dnsService  = model.ServicePort{ServiceName: model.ServiceName{Namespace: "kube-system", Name: "kube-dns"}, Port: "dns", Protocol: model.UDP}
	webService  = model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "web"}, Port: "http", Protocol: model.TCP}
)

// desiredWith is the desired state when backend ip is the service's only endpoint.
func desiredWith(ip string) map[model.Frontend]model.Verdict {
	v := func(sp model.ServicePort, port uint16) model.Verdict {
		b := netip.AddrPortFrom(netip.MustParseAddr(ip), port)
		return model.Verdict{Service: sp, Action: model.Forward, Backends: []netip.AddrPort{b},
			Endpoints: []model.Endpoint{{Addr: b, Ready: true, Serving: true, Included: true, Reason: "ready"}}}
	}
	return map[model.Frontend]model.Verdict{dnsFrontend: v(dnsService, 5353), webFrontend: v(webService, 8080)}
}

func TestNodeStateLiveStaleConntrack(t *testing.T) {
	a, client, _ := serviceNode(t)
	// The agent hands the node-level run the desired state only when a
	// flow may be stale: none before any traffic, the two below after it.
	if quiet := liveSnapshot(t, a); nodecheck.NeedsDesired(quiet) {
		t.Errorf("no traffic yet, but NeedsDesired: %d flows", len(quiet.Flows))
	}
	udpAsk(t, client, "10.96.0.10:53")
	tcpAsk(t, client, "10.96.0.10:80")
	if busy := liveSnapshot(t, a); !nodecheck.NeedsDesired(busy) {
		t.Errorf("two DNATed flows, but not NeedsDesired: %d flows", len(busy.Flows))
	}

	in := nodecheck.Inputs{NodeName: "a",
		Nodes:   []model.NodeInfo{liveNode("a", "10.77.0.0/24", "192.168.77.10")},
		Pods:    []model.PodInfo{livePod("client", "a", "10.77.0.2"), livePod("be-1", "a", "10.77.0.11"), livePod("be-2", "a", "10.77.0.12")},
		Desired: desiredWith("10.77.0.11")}
	in.Snapshot = liveSnapshot(t, a)
	if in.Snapshot.ConntrackUnavailable != "" {
		t.Fatalf("conntrack: %s", in.Snapshot.ConntrackUnavailable)
	}
	var dnat []string
	for _, f := range in.Snapshot.Flows {
		if f.Orig.Dst.Addr().String() == "10.96.0.10" {
			dnat = append(dnat, f.String()+" "+f.TCPState)
		}
	}
	if len(dnat) != 2 || !strings.Contains(strings.Join(dnat, ";"), "(reply from 10.77.0.11:5353)") ||
		!strings.Contains(strings.Join(dnat, ";"), "(reply from 10.77.0.11:8080) ESTABLISHED") {
		t.Fatalf("DNATed flows read from the kernel: %q", dnat)
	}
	fs, info := nodecheck.Check(in, nodecheck.Config{}, time.Now())
	wantLive(t, fs) // backends are current: nothing stale
	if info.FlowsChecked < 2 {
		t.Errorf("flows checked %d", info.FlowsChecked)
	}

	// backend 1 is removed from the cluster state (its pod went away, the
	// service now points at backend 2) while the flows' conntrack entries remain
	in.Desired = desiredWith("10.77.0.12")
	in.Pods = in.Pods[:1:1]
	in.Pods = append(in.Pods, livePod("be-2", "a", "10.77.0.12"))
	in.Snapshot = liveSnapshot(t, a)
	fs, info = nodecheck.Check(in, nodecheck.Config{}, time.Now())
	// the backend pod's leftover interface is reported too: its pod is gone from the API
	wantLive(t, fs, "orphan_link vbe1 (10.77.0.11)",
		"stale_conntrack conntrack udp 10.96.0.10:53", "stale_conntrack conntrack tcp 10.96.0.10:80")
	if fs[1].Service != dnsService || fs[2].Service != webService || *fs[2].Frontend != webFrontend {
		t.Errorf("services: %v %v", fs[1].Service, fs[2].Service)
	}
	if !strings.Contains(fs[1].Detail, "1 UDP conntrack entry still sends 10.96.0.10:53 to 10.77.0.11:5353") {
		t.Errorf("detail %q", fs[1].Detail)
	}
	if info.StaleConntrack[model.UDP] != 1 || info.StaleConntrack[model.TCP] != 1 {
		t.Errorf("per-protocol counts %v", info.StaleConntrack)
	}
}

// TestNodeStateLiveStaleBackendConnections: the NEW events the kernel
// reports for flows DNATed to a stale backend count, through hurt.Conns (what
// the agent wires to WatchConntrackNew), for the stale_backend findings of
// both frontends.
func TestNodeStateLiveStaleBackendConnections(t *testing.T) {
	a, client, _ := serviceNode(t)
	// the API says backend 2; the node's DNAT rules still say backend 1
	stale := func(fe model.Frontend, sp model.ServicePort, port uint16) drift.Tracked {
		return drift.Tracked{Finding: model.Finding{Kind: model.StaleBackend, Frontend: &fe, Service: sp,
			Backend: netip.AddrPortFrom(netip.MustParseAddr("10.77.0.11"), port)}}
	}
	dns, web := stale(dnsFrontend, dnsService, 5353), stale(webFrontend, webService, 8080)
	counter := hurt.New(func() ([]drift.Tracked, []drift.Tracked) {
		return []drift.Tracked{dns}, []drift.Tracked{web} // web's mismatch still pending promotion
	}, nil, 0, 10)
	count := func(f drift.Tracked) uint64 { n, _ := counter.Connections(f.Key()); return n }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- WatchConntrackNew(ctx, a, func(f model.Flow) { counter.Observe(f) }) }()
	// the subscription is asynchronous: keep opening new flows until one is seen
	for deadline := time.Now().Add(10 * time.Second); count(dns) == 0; {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no stale NEW event counted; watcher: %v", <-done)
		}
		udpAsk(t, client, "10.96.0.10:53")
		time.Sleep(100 * time.Millisecond)
	}
	tcpAsk(t, client, "10.96.0.10:80")
	for deadline := time.Now().Add(5 * time.Second); count(web) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("TCP connection to the stale backend not counted (dns %d)", count(dns))
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("watcher ended with %v, want context.Canceled", err)
	}
}
