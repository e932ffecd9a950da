//go:build linux

package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nftables"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"github.com/netdrift/netdrift/internal/testutil/wait"
	"github.com/netdrift/netdrift/internal/watch"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// lagTolerance is how far a measured T2-T1 may be from the injected delay.
const lagTolerance = 150 * time.Millisecond

// firstSeenWithin bounds when a mismatch is first seen after the change
// revealing it: the next fast poll (the agent does not read on every watch
// event) plus one read on a loaded machine.
const firstSeenWithin = 500 * time.Millisecond

// newNetns creates an empty named network namespace, removed on cleanup.
func newNetns(t *testing.T) string {
	t.Helper()
	netnstest.RequireRoot(t, "network namespaces")
	return netnstest.New(t, "nd-agent")
}

// Datapath modes the live test plays kube-proxy in.
const (
	modeIPTablesNFT    = "iptables-nft"    // iptables-restore, nf_tables backend: events date the reads
	modeIPTablesLegacy = "iptables-legacy" // iptables-restore, legacy backend: polled
	modeNFTables       = "nftables"        // nft -f, kube-proxy's nftables mode: events date the reads
)

// kubeProxy plays kube-proxy in a test netns: it writes kube-proxy-shaped
// rules for shop/web:http with iptables-restore or nft -f, replacing what
// it wrote before in one transaction.
type kubeProxy struct {
	t      *testing.T
	ns     string
	tool   string
	args   []string
	render func(vip string, eps []string) []byte
}

func newKubeProxy(t *testing.T, ns, mode string) *kubeProxy {
	t.Helper()
	k := &kubeProxy{t: t, ns: ns}
	var probe []byte
	switch mode {
	case modeNFTables:
		k.tool, k.args, k.render = "nft", []string{"-f", "-"}, kubeProxyNFT
		probe = []byte("table ip netdrift-probe\ndelete table ip netdrift-probe\n")
	default:
		k.tool, k.render = mode+"-restore", kubeProxyRules
		probe = []byte("*nat\nCOMMIT\n")
	}
	bin, err := exec.LookPath(k.tool)
	if err != nil {
		t.Skipf("%s unavailable: %v", mode, err)
	}
	k.tool = bin
	if err := k.write(probe); err != nil {
		t.Skipf("kernel lacks %s: %v", mode, err)
	}
	return k
}

func (k *kubeProxy) write(rules []byte) error {
	cmd := exec.Command("ip", append([]string{"netns", "exec", k.ns, k.tool}, k.args...)...)
	cmd.Stdin = bytes.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", k.tool, err, out)
	}
	return nil
}

// program replaces the rules with those for endpoints eps (port 8080).
func (k *kubeProxy) program(eps ...string) {
	k.t.Helper()
	if err := k.write(k.render("10.96.0.10", eps)); err != nil {
		k.t.Fatal(err)
	}
}

// kubeProxyNFT renders kube-proxy's nftables-mode table for one ClusterIP
// service port: service-ips map, service and endpoint chains, numgen vmap.
// The table is re-created in the same transaction (nft -f is atomic).
func kubeProxyNFT(vip string, eps []string) []byte {
	sp := model.ServicePort{ServiceName: model.ServiceName{Namespace: testNS, Name: testSvc}, Port: "http", Protocol: model.TCP}
	base := nftables.ChainBase(sp)
	svc := "service-" + nftables.ChainHash(base) + "-" + base
	var b strings.Builder
	b.WriteString("table ip kube-proxy\ndelete table ip kube-proxy\ntable ip kube-proxy {\n")
	b.WriteString("\tcomment \"rules for kube-proxy\"\n")
	b.WriteString("\tchain mark-for-masquerade {\n\t\tmeta mark set meta mark | 0x00004000\n\t}\n")
	var vmap []string
	for i, ep := range eps {
		name := base + "__" + ep + "/8080"
		chain := "endpoint-" + nftables.ChainHash(name) + "-" + name
		fmt.Fprintf(&b, "\tchain %s {\n\t\tip saddr %s jump mark-for-masquerade\n\t\tmeta l4proto tcp dnat to %s:8080\n\t}\n", chain, ep, ep)
		vmap = append(vmap, fmt.Sprintf("%d : goto %s", i, chain))
	}
	fmt.Fprintf(&b, "\tchain %s {\n\t\tip daddr %s tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade\n", svc, vip)
	fmt.Fprintf(&b, "\t\tnumgen random mod %d vmap { %s }\n\t}\n", len(eps), strings.Join(vmap, ", "))
	fmt.Fprintf(&b, `	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "ClusterIP, ExternalIP and LoadBalancer IP traffic"
		elements = { %s . tcp . 80 : goto %s }
	}
	map service-nodeports {
		type inet_proto . inet_service : verdict
	}
	map no-endpoint-services {
		type ipv4_addr . inet_proto . inet_service : verdict
	}
	map no-endpoint-nodeports {
		type inet_proto . inet_service : verdict
	}
	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
	}
	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		jump services
	}
	chain nat-output {
		type nat hook output priority -100; policy accept;
		jump services
	}
}
`, vip, svc)
	return []byte(b.String())
}

// kubeProxyRules renders kube-proxy's iptables-mode nat rules for one
// ClusterIP service port, with its chain names, comments and probabilities.
func kubeProxyRules(vip string, eps []string) []byte {
	sp := model.ServicePort{ServiceName: model.ServiceName{Namespace: testNS, Name: testSvc}, Port: "http", Protocol: model.TCP}
	name := iptables.KubeProxyPortName(sp)
	svc := "KUBE-SVC-" + iptables.ChainHash(sp)
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	b.WriteString(":KUBE-SERVICES - [0:0]\n:KUBE-NODEPORTS - [0:0]\n:KUBE-POSTROUTING - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n")
	b.WriteString(":" + svc + " - [0:0]\n")
	seps := make([]string, len(eps))
	for i, ep := range eps {
		seps[i] = "KUBE-SEP-" + iptables.EndpointChainHash(sp, ep+":8080")
		b.WriteString(":" + seps[i] + " - [0:0]\n")
	}
	b.WriteString(`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
`)
	fmt.Fprintf(&b, "-A KUBE-SERVICES -m comment --comment \"%s cluster IP\" -m tcp -p tcp -d %s --dport 80 -j %s\n", name, vip, svc)
	fmt.Fprintf(&b, "-A %s -m comment --comment \"%s cluster IP\" -m tcp -p tcp -d %s --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ\n", svc, name, vip)
	for i, ep := range eps {
		stat := ""
		if rest := len(eps) - i; rest > 1 {
			stat = fmt.Sprintf(" -m statistic --mode random --probability %.10f", 1/float64(rest))
		}
		fmt.Fprintf(&b, "-A %s -m comment --comment \"%s -> %s:8080\"%s -j %s\n", svc, name, ep, stat, seps[i])
	}
	for i, ep := range eps {
		fmt.Fprintf(&b, "-A %s -m comment --comment %s -s %s -j KUBE-MARK-MASQ\n", seps[i], name, ep)
		fmt.Fprintf(&b, "-A %s -m comment --comment %s -m tcp -p tcp -j DNAT --to-destination %s:8080\n", seps[i], name, ep)
	}
	b.WriteString("-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\nCOMMIT\n")
	return []byte(b.String())
}

// liveRig is the real agent over a fake API, the real watcher, the real
// iptables reader in a test netns and the real clock.
type liveRig struct {
	t   *testing.T
	api *fakeAPI
	kp  *kubeProxy
	a   *agent.Agent
	w   *informer.Watcher
	cfg agent.Config

	polled *timedSource // set when the datapath has no change events

	mu        sync.Mutex
	sliceT1   time.Time // the last EndpointSlice delivery (T1)
	sliceSeen int
}

func startLive(t *testing.T, mode string, eps ...string) *liveRig {
	ns := newNetns(t)
	r := &liveRig{t: t, kp: newKubeProxy(t, ns, mode)}
	r.kp.program(eps...)
	now := time.Now()
	r.api = newFakeAPI(t, testService("10.96.0.10"), testSlice(now, eps...), testNode())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	r.cfg = agent.DefaultConfig()
	r.cfg.NodeName, r.cfg.StaleAfter, r.cfg.WatchUnhealthyAfter = nodeName, time.Second, time.Minute
	// Poll at --fast-poll whatever a read costs on this (loaded) machine: the
	// test measures precision; the cost guard has its own unit test.
	r.cfg.MinPollCostFactor = 1
	opts := agent.Options{Config: r.cfg, Clock: clock.RealClock{}, Mode: model.ModeIPTables}
	if mode == modeNFTables {
		opts.Mode = model.ModeNFTables
	}
	src, err := datapath.Open(opts.Mode, ns) // the iptables backend holding the rules is picked, as in the agent
	if err != nil {
		t.Fatal(err)
	}
	opts.Datapath = src
	if mode == modeIPTablesLegacy {
		r.polled = &timedSource{Reader: src}
		opts.Datapath = r.polled
	}
	if mode != modeIPTablesLegacy {
		// nft and iptables-nft commit nf_tables transactions: their events
		// go to the loop (and date T2), as cmd/agent wires them.
		cw, err := datapath.WatchChanges(ctx, ns)
		if err != nil {
			t.Fatalf("nf_tables events: %v", err)
		}
		t.Cleanup(func() { _ = cw.Close() })
		opts.Changes = cw.Events()
	} else {
		// iptables-legacy has no events: fast polling is the precision.
		r.cfg.FastPoll = 20 * time.Millisecond
	}
	opts.Config = r.cfg
	r.w = informer.NewWatcher(r.api.cs, nodeName, clock.RealClock{}, func(ev watch.Event) {
		if ev.Kind == watch.KindEndpointSlice {
			r.mu.Lock()
			r.sliceT1, r.sliceSeen = ev.At, r.sliceSeen+1
			r.mu.Unlock()
		}
		r.a.OnEvent(ev)
	})
	opts.Cluster = r.w
	r.a = agent.New(opts)
	r.w.Start(ctx)
	r.api.waitWatches(r.w)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wait.For(t, 30*time.Second, "the agent ready and converged", func() bool {
		s := r.a.State()
		return s.Ready && len(s.Observed.Frontends) > 0 && s.Converged()
	})
	return r
}

// change updates the slice in the API and waits for the watcher to deliver
// it to the agent; it returns the delivery time T1.
func (r *liveRig) change(eps ...string) time.Time {
	r.t.Helper()
	r.mu.Lock()
	seen := r.sliceSeen
	r.mu.Unlock()
	r.api.updateSlice(testSlice(time.Now(), eps...))
	var t1 time.Time
	wait.For(r.t, 10*time.Second, "the change delivered to the agent", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		t1 = r.sliceT1
		return r.sliceSeen > seen
	})
	return t1
}

// sampleAfter waits for a lag sample newer than n samples.
func (r *liveRig) sampleAfter(n int) drift.LagSample {
	r.t.Helper()
	var s drift.LagSample
	wait.For(r.t, 10*time.Second, "a lag sample", func() bool {
		rec := r.a.State().Recent
		if len(rec) > n {
			s = rec[len(rec)-1]
			return true
		}
		return false
	})
	return s
}

// checkLag asserts T2-T1 matches the injected delay within lagTolerance.
// The rules change when the writer commits, somewhere in the took it ran
// after the delay, so the window is [delay, delay+took] +- lagTolerance
// (a polled read is timed at its start: T2 may be early by up to one read).
func (r *liveRig) checkLag(t *testing.T, s drift.LagSample, kind drift.ChangeKind, delay time.Duration, took time.Duration) {
	t.Helper()
	tolerance := lagTolerance
	if r.polled != nil {
		// No change events (iptables-legacy): a change is seen by the first
		// read that starts after it, so precision is one read plus
		// --fast-poll, honestly added (a loaded machine, -race).
		slack := r.polled.slowest() + r.cfg.FastPoll
		t.Logf("polled source: tolerance %v + slowest read %v + fast poll", lagTolerance, r.polled.slowest())
		tolerance += slack
	}
	lag := s.NodeLag()
	t.Logf("%s: injected %v, measured T2-T1 %v (the rule writer ran %v)", kind, delay, lag, took)
	if s.Kind != kind || s.Service != (model.ServiceName{Namespace: testNS, Name: testSvc}) {
		t.Errorf("sample %+v: want a %s change of %s/%s", s, kind, testNS, testSvc)
	}
	if lag < delay-tolerance || lag > delay+took+tolerance {
		t.Errorf("%s: T2-T1 %v, want %v..%v +-%v", kind, lag, delay, delay+took, tolerance)
	}
	if l, ok := s.NetworkLatency(); !ok || l < lag {
		t.Errorf("%s: T2-T0 %v (known %v) should be known and at least T2-T1 (T0 has second precision)", kind, l, ok)
	}
}

// TestLiveLagAndStaleFinding: the test plays kube-proxy (iptables-restore
// with either backend, or nft -f, in a fresh netns after chosen delays) and the API (fake clientset); the real
// watcher, agent and iptables reader measure the lag of an add, a remove and
// an update, and a rule left stale becomes a stale_backend finding after
// --stale-after and clears when kube-proxy fixes it.
func TestLiveLagAndStaleFinding(t *testing.T) {
	for _, mode := range []string{modeIPTablesNFT, modeIPTablesLegacy, modeNFTables} {
		t.Run(mode, func(t *testing.T) {
			r := startLive(t, mode, "10.244.1.10", "10.244.1.11")
			steps := []struct {
				kind  drift.ChangeKind
				delay time.Duration
				eps   []string
			}{
				{drift.ChangeAdd, 300 * time.Millisecond, []string{"10.244.1.10", "10.244.1.11", "10.244.1.12"}},
				{drift.ChangeRemove, 500 * time.Millisecond, []string{"10.244.1.10", "10.244.1.12"}},
				{drift.ChangeUpdate, 200 * time.Millisecond, []string{"10.244.1.10", "10.244.1.13"}},
			}
			for _, st := range steps {
				n := len(r.a.State().Recent)
				t1 := r.change(st.eps...)
				time.Sleep(time.Until(t1.Add(st.delay)))
				begin := time.Now()
				r.kp.program(st.eps...)
				took := time.Since(begin)
				r.checkLag(t, r.sampleAfter(n), st.kind, st.delay, took)
			}
			r.staleAndFix(t)
		})
	}
}

// staleAndFix: the API removes 10.244.1.13, kube-proxy leaves its rule.
func (r *liveRig) staleAndFix(t *testing.T) {
	n := len(r.a.State().Recent)
	t1 := r.change("10.244.1.10")
	stale := netip.MustParseAddrPort("10.244.1.13:8080")
	var promoted time.Time
	var s agent.State
	wait.For(t, 10*time.Second, "a stale_backend finding", func() bool {
		s = r.a.State()
		if len(s.Stale) > 0 {
			promoted = time.Now()
			return true
		}
		return false
	})
	if len(s.Stale) != 1 || s.Stale[0].Kind != model.StaleBackend || s.Stale[0].Backend != stale {
		t.Fatalf("stale findings %+v, want one stale_backend %v", s.Stale, stale)
	}
	f := s.Stale[0]
	t.Logf("stale_backend first seen %v after T1, promoted after %v", f.FirstSeen.Sub(t1), promoted.Sub(t1))
	if d := f.FirstSeen.Sub(t1); d < 0 || d > firstSeenWithin {
		t.Errorf("first seen %v after the change, want within %v", d, firstSeenWithin)
	}
	if d := promoted.Sub(f.FirstSeen); d < r.cfg.StaleAfter || d > r.cfg.StaleAfter+500*time.Millisecond {
		t.Errorf("promoted %v after first seen, want --stale-after %v (+500ms)", d, r.cfg.StaleAfter)
	}
	// kube-proxy catches up: the finding clears and the late removal is measured.
	fix := time.Now()
	r.kp.program("10.244.1.10")
	took := time.Since(fix)
	wait.For(t, 10*time.Second, "the finding cleared", func() bool {
		s = r.a.State()
		return len(s.Stale)+len(s.Pending) == 0 && s.Converged()
	})
	r.checkLag(t, r.sampleAfter(n), drift.ChangeRemove, fix.Sub(t1), took)
}

// timedSource records the slowest read of a source.
type timedSource struct {
	datapath.Reader
	mu  sync.Mutex
	max time.Duration
}

func (s *timedSource) Snapshot(ctx context.Context) (model.Observed, error) {
	start := time.Now()
	obs, err := s.Reader.Snapshot(ctx)
	d := time.Since(start)
	s.mu.Lock()
	if d > s.max {
		s.max = d
	}
	s.mu.Unlock()
	return obs, err
}

func (s *timedSource) slowest() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}
