//go:build linux

package iptables_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

// Service deletion as kube-proxy's iptables mode commits it: one
// iptables-restore --noflush transaction per table, KUBE-SERVICES written
// again (in another order) without the service's rules, its chains declared
// (which flushes them) and deleted with -X. After each sync the reader, fed
// the change events, must hold what a fresh full read holds, and its next
// Snapshot must name every frontend that went away as changed.

// svcSync is a kube-proxy-shaped sync of opsSpec's tables: services gone
// (removed with their chains), services emptied (endpoints removed: reject
// rules instead of their chains), and chains left out of the text
// (unchanged since the last sync: kube-proxy's partial sync does not write
// them).
type svcSync struct {
	gone, empty []bench.Service
	prior       []bench.Service // gone, their chains deleted by an earlier sync
	fresh       []bench.Service // new, no endpoints yet: reject rules, no chains
	partial     bool
	seed        uint64
	// kubeOrder, when set, lists the services to write the nat rules in
	// kube-proxy's order: per service (in random order) its KUBE-SERVICES
	// and KUBE-NODEPORTS rules and its chains' rules, then the -X lines,
	// then KUBE-SERVICES's last rule; endpoint rules carry the service
	// port's name as their comment, as outside large clusters.
	kubeOrder []bench.Service
}

// chainsOf are the nat chains of a service with endpoints.
func chainsOf(v bench.Service) []string {
	out := []string{"KUBE-SVC-" + iptables.ChainHash(v.Port)}
	if v.NodePort != 0 {
		out = append(out, "KUBE-EXT-"+iptables.ChainHash(v.Port))
	}
	for _, ep := range v.Endpoints {
		out = append(out, "KUBE-SEP-"+iptables.EndpointChainHash(v.Port, ep.String()))
	}
	return out
}

// mentions reports whether a restore line is about service v: one of its
// chains, or its port name in a comment.
func mentions(l string, v bench.Service) bool {
	if strings.Contains(l, `"`+iptables.KubeProxyPortName(v.Port)+" ") || strings.Contains(l, `"`+iptables.KubeProxyPortName(v.Port)+`"`) {
		return true
	}
	if len(v.Endpoints) == 0 {
		return false
	}
	return slices.ContainsFunc(chainsOf(v), func(c string) bool { return strings.Contains(l, c) })
}

// text renders the sync from the full tables of opsSpec (every service
// with its endpoints as the spec gives them).
func (s svcSync) text(base string) string {
	drop := slices.Concat(s.gone, s.empty, s.prior, s.fresh)
	rng := rand.New(rand.NewPCG(s.seed, 1))
	var out []string
	for _, tbl := range strings.SplitAfter(syncText(base), "COMMIT\n") {
		if strings.TrimSpace(tbl) == "" {
			continue
		}
		out = append(out, s.table(tbl, drop, rng))
	}
	return strings.Join(out, "")
}

func (s svcSync) table(tbl string, drop []bench.Service, rng *rand.Rand) string {
	lines := strings.Split(strings.TrimSuffix(tbl, "COMMIT\n"), "\n")
	nat := strings.HasPrefix(lines[0], "*nat")
	var decl, rules, services []string
	for _, l := range lines {
		switch {
		case l == "" || slices.ContainsFunc(drop, func(v bench.Service) bool { return mentions(l, v) }):
		case s.partial && nat && unchangedServiceChain(l):
		case strings.HasPrefix(l, "-A KUBE-SERVICES ") && !strings.Contains(l, "-j KUBE-NODEPORTS"):
			services = append(services, l)
		case strings.HasPrefix(l, "-A "):
			rules = append(rules, l)
		default:
			decl = append(decl, l)
		}
	}
	rng.Shuffle(len(services), func(i, j int) { services[i], services[j] = services[j], services[i] })
	last := slices.IndexFunc(rules, func(l string) bool { return strings.HasPrefix(l, "-A KUBE-SERVICES ") })
	if last < 0 {
		rules = append(rules, services...)
	} else {
		rules = slices.Insert(rules, last, services...)
	}
	var dels []string
	for _, v := range slices.Concat(s.empty, s.fresh) {
		name := iptables.KubeProxyPortName(v.Port)
		if nat {
			continue
		}
		rules = append(rules, fmt.Sprintf(`-A KUBE-SERVICES -d %s/32 -p tcp -m comment --comment "%s has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable`, v.ClusterIP, name))
		if v.NodePort != 0 {
			rules = append(rules, fmt.Sprintf(`-A KUBE-EXTERNAL-SERVICES -p tcp -m comment --comment "%s has no endpoints" -m addrtype --dst-type LOCAL -m tcp --dport %d -j REJECT --reject-with icmp-port-unreachable`, name, v.NodePort))
		}
	}
	if nat {
		for _, v := range slices.Concat(s.gone, s.empty) {
			if len(v.Endpoints) == 0 {
				continue
			}
			for _, c := range chainsOf(v) {
				decl = append(decl, ":"+c+" - [0:0]")
				dels = append(dels, "-X "+c)
			}
		}
	}
	if nat && s.kubeOrder != nil {
		rules = s.inKubeOrder(rules, dels, rng)
		dels = nil
	}
	return strings.Join(slices.Concat(decl, rules, dels), "\n") + "\nCOMMIT\n"
}

// inKubeOrder orders a nat table's rules (and -X lines) as kube-proxy
// writes them.
func (s svcSync) inKubeOrder(rules, dels []string, rng *rand.Rand) []string {
	var base, last []string
	blocks := make([][]string, len(s.kubeOrder))
	for _, l := range rules {
		i := slices.IndexFunc(s.kubeOrder, func(v bench.Service) bool { return len(v.Endpoints) > 0 && mentions(l, v) })
		switch {
		case i >= 0:
			blocks[i] = append(blocks[i], withSEPComment(l, s.kubeOrder[i]))
		case strings.HasPrefix(l, "-A KUBE-SERVICES "):
			last = append(last, l)
		default:
			base = append(base, l)
		}
	}
	rng.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	return slices.Concat(base, slices.Concat(blocks...), dels, last)
}

// withSEPComment gives a KUBE-SEP rule the comment kube-proxy writes on
// endpoint rules outside large clusters (the service port's name).
func withSEPComment(l string, v bench.Service) string {
	f := strings.SplitN(l, " ", 3)
	if len(f) < 3 || f[0] != "-A" || !strings.HasPrefix(f[1], "KUBE-SEP-") {
		return l
	}
	return f[0] + " " + f[1] + " -m comment --comment " + iptables.KubeProxyPortName(v.Port) + " " + f[2]
}

// unchangedServiceChain: a declaration or rule of a per-service chain
// (KUBE-SVC, KUBE-EXT, KUBE-SEP), which a partial sync leaves unwritten.
func unchangedServiceChain(l string) bool {
	for _, p := range []string{":KUBE-SVC-", ":KUBE-EXT-", ":KUBE-SEP-", "-A KUBE-SVC-", "-A KUBE-EXT-", "-A KUBE-SEP-"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// withEndpoints lists opsSpec's services with endpoints, node port ones
// (nodePort true) or not.
func withEndpoints(nodePort bool) []bench.Service {
	var out []bench.Service
	for _, v := range opsSpec.List() {
		if len(v.Endpoints) > 0 && (v.NodePort != 0) == nodePort {
			out = append(out, v)
		}
	}
	return out
}

// stepGone commits a sync, applies its events and checks the reader
// against a fresh read; the services in gone must have no frontend left,
// and every frontend that went away must be named changed.
func (r *opsRig) stepGone(what, in string, gone ...bench.Service) {
	r.t.Helper()
	r.syncGone(what, in, true, gone)
}

// stepStillGone is stepGone for services deleted by an earlier sync.
func (r *opsRig) stepStillGone(what, in string, gone ...bench.Service) {
	r.t.Helper()
	r.syncGone(what, in, false, gone)
}

func (r *opsRig) syncGone(what, in string, existed bool, gone []bench.Service) {
	r.t.Helper()
	ctx := context.Background()
	before, err := r.nr.Snapshot(ctx, r.hints)
	if err != nil {
		r.t.Fatal(err)
	}
	prev, _ := r.nr.Frozen()
	for _, v := range gone {
		if existed && !slices.ContainsFunc(slices.Collect(maps.Keys(prev.Frontends)), func(f model.Frontend) bool { return f.IP == v.ClusterIP }) {
			r.t.Fatalf("%s: service %s has no frontend before its deletion (the test's premise)", what, v.Port)
		}
	}
	st := r.step(what, in)
	if !r.noOps && (st.LastChains != 0 || st.PatchFallbacks != 0 || st.LastPatched == 0) {
		r.t.Errorf("%s: want every chain patched from the messages, stats %+v", what, st)
	}
	if r.noOps && (st.LastPatched != 0 || st.LastChains == 0) {
		r.t.Errorf("%s: want the chains named read, none patched, stats %+v", what, st)
	}
	after, err := r.nr.Snapshot(ctx, r.hints)
	if err != nil {
		r.t.Fatal(err)
	}
	for f := range after.Frontends {
		for _, v := range gone {
			if f.IP == v.ClusterIP || v.NodePort != 0 && f.Port == v.NodePort && f.Kind == model.NodePort {
				r.t.Errorf("%s: frontend %v of a deleted service still observed", what, f)
			}
		}
	}
	if after.Version != before.Version && after.Since != before.Version {
		r.t.Fatalf("%s: since %d, want the previous snapshot's version %d", what, after.Since, before.Version)
	}
	for f, v := range prev.Frontends {
		if w, ok := after.Frontends[f]; (!ok || !w.Equal(v)) && !after.Changed[f] {
			r.t.Errorf("%s: frontend %v changed (present %v) and is not named changed", what, f, ok)
		}
	}
}

// forget gives the reader the hints of the cluster without the services
// gone (the agent's watch saw them deleted) and takes a Snapshot with
// them: the cached tables walked again.
func (r *opsRig) forget(gone ...bench.Service) {
	r.t.Helper()
	r.hints = hintsWithout(r.spec, gone)
	if _, err := r.nr.Snapshot(context.Background(), r.hints); err != nil {
		r.t.Fatal(err)
	}
}

// hintsWithout are the hints of spec's cluster without the services gone.
func hintsWithout(spec bench.Spec, gone []bench.Service) model.Hints {
	cs := spec.ClusterState()
	drop := func(ns, name string) bool {
		return slices.ContainsFunc(gone, func(v bench.Service) bool { return v.Port.Namespace == ns && v.Port.Name == name })
	}
	var kept watch.ClusterState
	kept.Nodes = cs.Nodes
	for _, s := range cs.Services {
		if !drop(s.Namespace, s.Name) {
			kept.Services = append(kept.Services, s)
		}
	}
	for _, sl := range cs.EndpointSlices {
		if !drop(sl.Namespace, sl.Labels["kubernetes.io/service-name"]) {
			kept.EndpointSlices = append(kept.EndpointSlices, sl)
		}
	}
	return model.HintsFor(watch.Expected(bench.NodeName, &kept))
}

// TestNFTServiceDeletedWithEndpoints: one service with endpoints deleted
// with its pods (KUBE-SERVICES reordered, its chains flushed and deleted in
// the same transaction), with and without a node port, then two at once.
func TestNFTServiceDeletedWithEndpoints(t *testing.T) {
	base := opsSpec.IPTablesRestore()
	np, plain := withEndpoints(true), withEndpoints(false)
	for _, tc := range []struct {
		name        string
		gone        []bench.Service
		partial     bool
		hintsBefore bool // the watch saw the deletion before kube-proxy's sync
		noOps       bool // events without rule messages: the chains named are read
	}{
		{"two in one sync, chains read", []bench.Service{plain[0], np[0]}, false, true, true},
		{"partial sync, chains read", []bench.Service{plain[1], np[0]}, true, false, true},
		{"cluster IP", plain[:1], false, false, false},
		{"cluster IP, hints first", plain[:1], false, true, false},
		{"node port", np[:1], false, false, false},
		{"node port, hints first", np[:1], false, true, false},
		{"two in one sync", []bench.Service{plain[0], np[0]}, false, true, false},
		{"partial sync", []bench.Service{plain[1], np[0]}, true, false, false},
		{"partial sync, hints first", []bench.Service{plain[1], np[0]}, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newOpsRig(t)
			r.noOps = tc.noOps
			r.stepGone("identical sync", svcSync{seed: 1}.text(base))
			if tc.hintsBefore {
				r.forget(tc.gone...)
			}
			s := svcSync{gone: tc.gone, partial: tc.partial, seed: 2}
			r.stepGone("deleted", s.text(base), tc.gone...)
			if !tc.hintsBefore {
				r.forget(tc.gone...)
				r.sameAsFresh("hints without the deleted services")
			}
			s.partial, s.seed = true, 3
			r.stepStillGone("next sync", s.text(base), tc.gone...)
		})
	}
}

// TestNFTServiceDeletedAfterEndpoints: the endpoints go in one sync (the
// service's chains deleted, reject rules added), the service in the next
// (reject rules gone).
func TestNFTServiceDeletedAfterEndpoints(t *testing.T) {
	base := opsSpec.IPTablesRestore()
	for _, v := range []bench.Service{withEndpoints(false)[0], withEndpoints(true)[0]} {
		t.Run(iptables.KubeProxyPortName(v.Port), func(t *testing.T) {
			r := newOpsRig(t)
			r.stepGone("endpoints removed", svcSync{empty: []bench.Service{v}, seed: 4}.text(base))
			r.forget(v)
			r.stepGone("service deleted", svcSync{prior: []bench.Service{v}, partial: true, seed: 5}.text(base), v)
		})
	}
}

// TestNFTServiceDeletedAnotherAdded: a service deleted and another created
// in the same sync and in the next one (a scenario's cleanup followed by
// the next scenario's setup), first without endpoints, then with them.
func TestNFTServiceDeletedAnotherAdded(t *testing.T) {
	grown := opsSpec
	grown.Services++
	added := grown.List()[opsSpec.Services]
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("same sync %v", same), func(t *testing.T) {
			r := newOpsRig(t)
			gone := withEndpoints(false)[0]
			add := svcSync{gone: []bench.Service{gone}, fresh: []bench.Service{added}, partial: true, seed: 7}
			if same {
				r.stepGone("deleted, another added without endpoints", add.text(grown.IPTablesRestore()), gone)
			} else {
				r.stepGone("deleted", svcSync{gone: []bench.Service{gone}, seed: 6}.text(opsSpec.IPTablesRestore()), gone)
				add.gone, add.prior = nil, []bench.Service{gone}
				r.stepStillGone("another added without endpoints", add.text(grown.IPTablesRestore()), gone)
			}
			r.stepStillGone("endpoints of the added", svcSync{prior: []bench.Service{gone}, partial: false, seed: 8}.text(grown.IPTablesRestore()), gone)
		})
	}
}
