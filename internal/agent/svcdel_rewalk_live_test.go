//go:build linux

package agent

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"github.com/netdrift/netdrift/internal/watch"
)

// rwSvc is one ClusterIP service of the rewalk test: name, address and
// endpoint addresses (port 8080), as service() and slice() build them.
type rwSvc struct {
	name, ip string
	eps      []string
}

func (s rwSvc) port() model.ServicePort {
	return model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: s.name}, Port: "http", Protocol: model.TCP}
}

// chains are the service's nat chains: KUBE-SVC, then one KUBE-SEP per endpoint.
func (s rwSvc) chains() []string {
	out := []string{"KUBE-SVC-" + iptables.ChainHash(s.port())}
	for _, ep := range s.eps {
		out = append(out, "KUBE-SEP-"+iptables.EndpointChainHash(s.port(), ep+":8080"))
	}
	return out
}

// rwSync is kube-proxy's iptables-restore --noflush input for a sync that
// programs present and removes removed: KUBE-SERVICES written whole, every
// present service's chains declared and written, the removed ones' chains
// declared (which flushes them) and deleted with -X in the same transaction.
func rwSync(present, removed []rwSvc) string {
	var decl, rules, dels strings.Builder
	decl.WriteString("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n")
	rules.WriteString("-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n")
	for _, s := range present {
		name, cs := iptables.KubeProxyPortName(s.port()), s.chains()
		for _, c := range cs {
			fmt.Fprintf(&decl, ":%s - [0:0]\n", c)
		}
		fmt.Fprintf(&rules, "-A KUBE-SERVICES -m comment --comment \"%s cluster IP\" -m tcp -p tcp -d %s --dport 80 -j %s\n", name, s.ip, cs[0])
		for i, ep := range s.eps {
			stat := ""
			if rest := len(s.eps) - i; rest > 1 {
				stat = fmt.Sprintf(" -m statistic --mode random --probability %.10f", 1/float64(rest))
			}
			fmt.Fprintf(&rules, "-A %s -m comment --comment \"%s -> %s:8080\"%s -j %s\n", cs[0], name, ep, stat, cs[i+1])
			fmt.Fprintf(&rules, "-A %s -m comment --comment %s -s %s -j KUBE-MARK-MASQ\n", cs[i+1], name, ep)
			fmt.Fprintf(&rules, "-A %s -m comment --comment %s -m tcp -p tcp -j DNAT --to-destination %s:8080\n", cs[i+1], name, ep)
		}
	}
	for _, s := range removed {
		for _, c := range s.chains() {
			fmt.Fprintf(&decl, ":%s - [0:0]\n", c)
			fmt.Fprintf(&dels, "-X %s\n", c)
		}
	}
	return decl.String() + rules.String() + dels.String() + "COMMIT\n"
}

// nextEvents hands the agent every change event the watcher delivers for
// the sync just committed (the first within 5 s, then until 300 ms pass
// without one), as the agent's loop does. It returns how many it applied.
func nextEvents(t *testing.T, h *harness, evs <-chan datapath.ChangeEvent) int {
	t.Helper()
	n := 0
	wait := 5 * time.Second
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatal("nf_tables change events ended")
			}
			h.a.onChange(h.ctx, ev, true)
			n++
			wait = 300 * time.Millisecond
		case <-time.After(wait):
			if n == 0 {
				t.Fatal("no nf_tables change event for kube-proxy's sync")
			}
			return n
		}
	}
}

// rwStart programs svcs in a new netns and starts the agent over
// the real iptables mode reader, compared clean once; it returns the
// harness, the netns and the change events.
func rwStart(t *testing.T, svcs ...rwSvc) (*harness, string, datapath.Reader, <-chan datapath.ChangeEvent) {
	t.Helper()
	netnstest.RequireRoot(t, "network namespaces and iptables-nft")
	if _, err := exec.LookPath("iptables-nft-restore"); err != nil {
		t.Skip("iptables-nft-restore not installed: ", err)
	}
	ns := netnstest.New(t, "ndrw")
	netnstest.RunInput(t, ns, rwSync(svcs, nil), "iptables-nft-restore")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	src, err := datapath.Open(model.ModeIPTables, ns)
	if err != nil {
		t.Fatal(err)
	}
	cw, err := datapath.WatchChanges(ctx, ns)
	if err != nil {
		t.Fatalf("nf_tables change events: %v", err)
	}
	t.Cleanup(func() { _ = cw.Close() })
	h := newHarness(t)
	h.a.src = src
	for _, s := range svcs {
		rwPut(h, s)
	}
	h.a.Step(h.ctx)
	if s := h.a.State(); !s.Ready || len(s.Stale)+len(s.Pending) != 0 || len(s.Observed.Frontends) != len(svcs) {
		t.Fatalf("initial state not clean: ready=%v stale=%v pending=%v observed=%v", s.Ready, s.Stale, s.Pending, s.Observed.Frontends)
	}
	return h, ns, src, cw.Events()
}

// rwPut adds (or replaces) a service and its slice in the watch cache.
func rwPut(h *harness, s rwSvc) {
	h.c.mu.Lock()
	h.c.services["shop/"+s.name] = service(s.name, s.ip)
	h.c.slices["shop/"+s.name] = []*discoveryv1.EndpointSlice{slice(s.name, s.eps...)}
	h.c.mu.Unlock()
	h.a.OnEvent(watch.Event{Kind: watch.KindService, Service: s.port().ServiceName, At: h.clk.Now()})
	h.a.OnEvent(watch.Event{Kind: watch.KindEndpointSlice, Service: s.port().ServiceName, At: h.clk.Now()})
}

// rwDelete removes a service and its slice from the watch cache (a Service
// deleted with its pods), and lets the agent read: the deleted Service's
// frontend, still programmed, must be a pending stale_frontend.
func rwDelete(t *testing.T, h *harness, s rwSvc) {
	t.Helper()
	h.c.mu.Lock()
	delete(h.c.services, "shop/"+s.name)
	delete(h.c.slices, "shop/"+s.name)
	h.c.mu.Unlock()
	h.a.OnEvent(watch.Event{Kind: watch.KindService, Service: s.port().ServiceName, At: h.clk.Now()})
	h.a.OnEvent(watch.Event{Kind: watch.KindEndpointSlice, Service: s.port().ServiceName, At: h.clk.Now()})
	h.advance(100 * time.Millisecond)
	if st := h.a.State(); len(st.Pending) != 1 || st.Pending[0].Kind != model.StaleFrontend || st.Pending[0].Service.ServiceName != s.port().ServiceName {
		t.Fatalf("before kube-proxy's sync: want one pending stale_frontend for %s (the test's premise), got stale %v pending %v", s.name, st.Stale, st.Pending)
	}
}

// rwNoFindingFor fails if the agent holds a finding for s, and checks that
// it observes exactly want.
func rwNoFindingFor(t *testing.T, h *harness, s rwSvc, when string, want ...rwSvc) {
	t.Helper()
	st := h.a.State()
	for _, f := range append(st.Stale, st.Pending...) {
		if f.Service.ServiceName == s.port().ServiceName {
			t.Fatalf("%s: a finding for the deleted %s stays after kube-proxy removed its rules: %s %s (stale %v, pending %v)",
				when, s.name, f.Kind, f.Frontend, st.Stale, st.Pending)
		}
	}
	for _, w := range want {
		if _, ok := st.Observed.Frontends[model.NewFrontend(netip.MustParseAddr(w.ip), 80, model.TCP, model.ClusterIP)]; !ok {
			t.Fatalf("%s: observed %v, want %s's frontend", when, st.Observed.Frontends, w.name)
		}
	}
	if len(st.Observed.Frontends) != len(want) {
		t.Fatalf("%s: observed %v, want %d frontends", when, st.Observed.Frontends, len(want))
	}
}

// TestLiveStaleFrontendClearsWhenTheNextReadWalksAgain: a Service deleted
// with its pods, as the lab's scenarios delete theirs. The agent sees the
// deletion first (a pending stale_frontend while kube-proxy has not synced
// yet); kube-proxy's sync reaches the iptables-nft reader as a change event
// applied in place to the observation the agent compared last; then the
// next Service is created, so the next read hands the reader new hints and
// it walks its tables again into a new observation before any compare.
// That read must still compare the deleted Service's frontend: a diff of
// the old map (already changed in place) against the new one finds no
// difference, and the finding would stay: a false stale_frontend (and
// NetdriftStaleDNAT) on a healthy node.
func TestLiveStaleFrontendClearsWhenTheNextReadWalksAgain(t *testing.T) {
	web := rwSvc{"web", "10.96.0.10", []string{"10.1.0.1", "10.1.0.2"}}
	gone := rwSvc{"gone", "10.96.0.11", []string{"10.1.0.3"}}
	next := rwSvc{"next", "10.96.0.12", []string{"10.1.0.4"}}
	h, ns, src, evs := rwStart(t, web, gone)
	rwDelete(t, h, gone)

	// kube-proxy's sync, applied to the reader's cache in place.
	netnstest.RunInput(t, ns, rwSync([]rwSvc{web}, []rwSvc{gone}), "iptables-nft-restore", "--noflush")
	nextEvents(t, h, evs)
	if fz, ok := src.(datapath.Freezer); !ok {
		t.Fatal("the iptables mode's reader is no datapath.Freezer: the test's premise (an observation changed in place) fails")
	} else if obs, ok := fz.Frozen(); !ok || len(obs.Frontends) != 1 {
		t.Fatalf("after the event: the reader's observation %v (%v), want web's frontend only (changed in place)", obs.Frontends, ok)
	}

	// The next Service: new hints, so the next read walks the tables again.
	rwPut(h, next)
	for range 4 {
		h.advance(h.a.cfg.StaleAfter)
	}
	rwNoFindingFor(t, h, gone, "after the walk for new hints", web)
}

// TestLiveStaleFrontendClearsAcrossAFallbackRead: as above, but the read
// after the change event applied in place falls back to iptables-save (a
// rule the netlink decoder does not know appeared in a KUBE-* chain, as a
// newer kube-proxy or another program may write). That read's observation
// names no changes; the agent compares every frontend, and must include the
// deleted Service's, which is in neither the observation it compared last
// (changed in place) nor the new one nor the desired state: only its
// finding remains. The full audit after --full-audit-interval must not
// leave it either.
func TestLiveStaleFrontendClearsAcrossAFallbackRead(t *testing.T) {
	web := rwSvc{"web", "10.96.0.10", []string{"10.1.0.1", "10.1.0.2"}}
	gone := rwSvc{"gone", "10.96.0.11", []string{"10.1.0.3"}}
	h, ns, _, evs := rwStart(t, web, gone)
	rwDelete(t, h, gone)

	netnstest.RunInput(t, ns, rwSync([]rwSvc{web}, []rwSvc{gone}), "iptables-nft-restore", "--noflush")
	nextEvents(t, h, evs)
	odd := "*nat\n:KUBE-UNDECODABLE - [0:0]\n-A KUBE-UNDECODABLE -m u32 --u32 \"0>>22&0x3C@4=0x29\" -j RETURN\nCOMMIT\n"
	cmd := netnstest.Cmd(ns, "iptables-nft-restore", "--noflush")
	cmd.Stdin = strings.NewReader(odd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("kernel or iptables lacks the u32 match: %v %s", err, out)
	}
	nextEvents(t, h, evs)
	h.advance(100 * time.Millisecond)
	if fb := h.a.State(); len(fb.Fallbacks) == 0 {
		t.Fatalf("no fallback in force after the undecodable rule (the test's premise): %+v", fb.Fallbacks)
	}
	for range 4 {
		h.advance(h.a.cfg.StaleAfter)
	}
	rwNoFindingFor(t, h, gone, "after the fallback read", web)
	h.advance(h.a.cfg.FullAuditInterval)
	rwNoFindingFor(t, h, gone, "after the full audit", web)
}
