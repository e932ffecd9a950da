// Package agenttest holds a fixed agent state for golden tests of the HTTP
// API, the metrics and the CLI: every time in it is fixed, so their output
// is byte-for-byte stable. Test support only; nothing in the agent uses it.
package agenttest

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
)

// Now is the state's clock.
var Now = time.Date(2026, 11, 29, 14, 30, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return Now.Add(d) }

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

var (
	web  = model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "web"}, Port: "http", Protocol: model.TCP}
	cart = model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "cart"}, Port: "grpc", Protocol: model.TCP}
	dns  = model.ServicePort{ServiceName: model.ServiceName{Namespace: "kube-system", Name: "kube-dns"}, Port: "dns", Protocol: model.UDP}

	webVIP  = model.NewFrontend(netip.MustParseAddr("10.96.0.10"), 80, model.TCP, model.ClusterIP)
	webNP   = model.NewNodePort(30080, model.TCP, model.IPv4)
	cartVIP = model.NewFrontend(netip.MustParseAddr("10.96.0.20"), 9090, model.TCP, model.ClusterIP)
	dnsVIP  = model.NewFrontend(netip.MustParseAddr("10.96.0.53"), 53, model.UDP, model.ClusterIP)
)

// State is a node with one stale backend (shop/web), one pending missing
// backend (shop/cart), one pending change, lag samples of every kind, a
// healthy watch and a degraded node source.
func State() agent.State {
	return agent.State{
		Node: "node-a", Datapath: model.ModeIPTables, DatapathReason: "KUBE-SERVICES chain in the ip nat table (iptables, nft backend)",
		Ready: true, Now: Now, LastAudit: at(-80 * time.Millisecond),
		View: agent.View{Current: true, Since: at(-42 * time.Minute)},
		Fallbacks: []agent.Fallback{{Reader: agent.FallbackChangeEvents, From: "kernel time", To: "read time",
			Reason: DatingError, Since: at(-42 * time.Minute)}},
		Watch: agent.WatchStatus{Synced: true, Healthy: true, HealthReason: "Lease renewals arrive", LeaseSeen: true,
			LastLeaseRenew: at(-4 * time.Second), LastLeaseDelivery: at(-4*time.Second + 35*time.Millisecond),
			LeaseDelay: 35 * time.Millisecond, LastDelivery: at(-1200 * time.Millisecond)},
		Sources: []agent.SourceStatus{
			{Name: model.ModeIPTables, Up: true, LastAttempt: at(-80 * time.Millisecond), LastSuccess: at(-80 * time.Millisecond),
				Duration: 42 * time.Millisecond},
			{Name: "node", Up: false, Error: nodeErr,
				LastAttempt: at(-6 * time.Second), LastSuccess: at(-66 * time.Second), Duration: 3 * time.Millisecond},
		},
		Stale:          []drift.Tracked{staleWeb()},
		Pending:        []drift.Tracked{pendingCart()},
		PendingChanges: []drift.PendingChange{{Service: model.ServiceName{Namespace: "shop", Name: "cart"}, Kind: drift.ChangeAdd, T0: at(-2 * time.Second), T1: at(-1200 * time.Millisecond)}},
		Recent:         Samples(),
		Desired:        model.Desired{Node: "node-a", Frontends: desired()},
		Observed: model.Observed{Datapath: model.ModeIPTables, Frontends: observed(),
			Warnings: []string{readerWarning}},
		DesiredFrontends: len(desired()), ObservedFrontends: len(observed()),
		// As the agent words them (publish.go): reader warnings, then degraded sources.
		Notes: []string{"datapath reader: 1 warning(s), first: " + readerWarning + " (all in /v1/drift)",
			"source node degraded: " + nodeErr},
	}
}

// Blind is a node whose agent cannot reach the API server: its caches have
// not synced, and its view is not current since it started.
func Blind() agent.State {
	const why = "waiting for caches to sync: endpointslice, lease"
	v := agent.View{Code: agent.ViewAPIFailing, Since: at(-65 * time.Second), LastError: APIError,
		Reason: "list/watch requests to the API server fail (40 failed since 2026-11-29T14:28:55Z): the watch cache is not kept current"}
	return agent.State{Node: "node-a", Datapath: model.ModeIPTables, Now: Now, ReadyReason: v.Reason, View: v,
		Watch: agent.WatchStatus{SyncReason: why, HealthReason: why}}
}

// APIError is the error of a dial to an API server nothing listens at;
// DatingError why change events are dated when read.
const (
	APIError    = "dial tcp 10.96.0.1:443: connect: connection refused"
	DatingError = "no BPF socket filter: operation not permitted"
)

// Samples are converged changes: add, remove (one superseding another) and update.
func Samples() []drift.LagSample {
	return []drift.LagSample{
		{Service: model.ServiceName{Namespace: "shop", Name: "web"}, Kind: drift.ChangeAdd, T0: at(-5 * time.Minute), T1: at(-5*time.Minute + 180*time.Millisecond),
			T2: at(-5*time.Minute + 420*time.Millisecond), T0Source: drift.T0Trigger},
		{Service: model.ServiceName{Namespace: "shop", Name: "web"}, Kind: drift.ChangeRemove, T0: at(-3 * time.Minute), T1: at(-3*time.Minute + 150*time.Millisecond),
			T2: at(-3*time.Minute + 1350*time.Millisecond), Superseded: 1, T0Source: drift.T0Trigger},
		{Service: model.ServiceName{Namespace: "kube-system", Name: "kube-dns"}, Kind: drift.ChangeUpdate, T1: at(-2 * time.Minute),
			T2: at(-2*time.Minute + 90*time.Millisecond)},
		{Service: model.ServiceName{Namespace: "shop", Name: "cart"}, Kind: drift.ChangeRemove, T0: at(-90 * time.Second), T1: at(-90*time.Second + 200*time.Millisecond),
			T2: at(-90*time.Second + 700*time.Millisecond), T0Source: drift.T0PodDeletion},
	}
}

// nodeErr is what the node source reports when it may not list routes;
// readerWarning one the iptables parser gives.
const (
	nodeErr       = `netns "": list routes: operation not permitted`
	readerWarning = "IPv4: cluster_ip 10.96.0.30:80 is captured but its chains DNAT to no endpoint"
)

func staleWeb() drift.Tracked {
	f := compared(model.StaleBackend, webVIP, "10.244.1.13:8080")
	f.FirstSeen = at(-7500 * time.Millisecond)
	return drift.Tracked{Proven: true, Stale: true, Finding: f}
}

func pendingCart() drift.Tracked {
	f := compared(model.MissingBackend, cartVIP, "10.244.2.21:50051")
	f.FirstSeen = at(-1100 * time.Millisecond)
	return drift.Tracked{Proven: true, Finding: f}
}

// compared is the finding drift.Compare reports for the state's desired and
// observed frontends, so its detail and evidence are the comparer's own.
func compared(kind model.FindingKind, fe model.Frontend, backend string) model.Finding {
	fs := drift.Compare(model.Desired{Node: "node-a", Frontends: desired()},
		model.Observed{Datapath: model.ModeIPTables, Frontends: observed()})
	for _, f := range fs {
		if f.Kind == kind && f.Frontend != nil && *f.Frontend == fe && f.Backend == ap(backend) {
			return f
		}
	}
	panic(fmt.Sprintf("agenttest: drift.Compare reports no %s for %s -> %s", kind, fe, backend))
}

func webEndpoints() []model.Endpoint {
	return []model.Endpoint{
		{Addr: ap("10.244.1.10:8080"), NodeName: "node-a", Ready: true, Serving: true, Included: true, Reason: "ready"},
		{Addr: ap("10.244.2.11:8080"), NodeName: "node-b", Ready: true, Serving: true, Included: true, Reason: "ready"},
		{Addr: ap("10.244.2.12:8080"), NodeName: "node-b", Serving: true, Terminating: true, Reason: "terminating (ready endpoints exist)"},
	}
}

func desired() map[model.Frontend]model.Verdict {
	fwd := model.Verdict{Service: web, Action: model.Forward,
		Backends: []netip.AddrPort{ap("10.244.1.10:8080"), ap("10.244.2.11:8080")}, Endpoints: webEndpoints()}
	return map[model.Frontend]model.Verdict{
		webVIP:  fwd,
		webNP:   fwd,
		cartVIP: {Service: cart, Action: model.Forward, Backends: []netip.AddrPort{ap("10.244.2.20:50051"), ap("10.244.2.21:50051")}},
		dnsVIP:  {Service: dns, Action: model.Forward, Backends: []netip.AddrPort{ap("10.244.0.5:53")}},
	}
}

func observed() map[model.Frontend]model.Verdict {
	// Evidence as the iptables parser gives it: the entry rule and the DNAT
	// rules of the service's chain.
	ev := []string{
		`-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "shop/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-67NZLRHBNDSAWJRO`,
		`-A KUBE-SEP-FZQ6KZLGXRSKN2AD -p tcp -m comment --comment "shop/web:http" -m tcp -j DNAT --to-destination 10.244.1.10:8080`,
		`-A KUBE-SEP-EIXAW3UET5NOOHSP -p tcp -m comment --comment "shop/web:http" -m tcp -j DNAT --to-destination 10.244.1.13:8080`,
		`-A KUBE-SEP-BTZNBNILETY57XCS -p tcp -m comment --comment "shop/web:http" -m tcp -j DNAT --to-destination 10.244.2.11:8080`,
	}
	return map[model.Frontend]model.Verdict{
		webVIP: {Service: web, Action: model.Forward, Evidence: ev,
			Backends: []netip.AddrPort{ap("10.244.1.10:8080"), ap("10.244.1.13:8080"), ap("10.244.2.11:8080")}},
		webNP: {Service: web, Action: model.Forward,
			Backends: []netip.AddrPort{ap("10.244.1.10:8080"), ap("10.244.2.11:8080")}},
		cartVIP: {Service: cart, Action: model.Forward, Backends: []netip.AddrPort{ap("10.244.2.20:50051")}},
		dnsVIP:  {Service: dns, Action: model.Forward, Backends: []netip.AddrPort{ap("10.244.0.5:53")}},
	}
}

// ManyStale returns n stale_backend findings spread over services: service
// i (svc-000, svc-001, ...) has i%3+1 of them, for label-cap tests.
func ManyStale(services int) []drift.Tracked {
	var out []drift.Tracked
	for i := 0; i < services; i++ {
		sp := model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns", Name: svcName(i)}, Port: "http", Protocol: model.TCP}
		for j := 0; j <= i%3; j++ {
			out = append(out, drift.Tracked{Proven: true, Stale: true, Finding: model.Finding{
				Kind: model.StaleBackend, Service: sp,
				Backend:   netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), byte(j + 1)}), 8080),
				FirstSeen: at(-time.Minute),
			}})
		}
	}
	return out
}

func svcName(i int) string {
	const digits = "0123456789"
	return "svc-" + string(digits[i/100%10]) + string(digits[i/10%10]) + string(digits[i%10])
}
