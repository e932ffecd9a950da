package iptables

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

// viewFixture is one family of a fixture, parsed into tables a test mutates
// the way the netlink reader's chain re-reads do.
type viewFixture struct {
	fam   model.IPFamily
	tag   string
	d     ipDump
	hints model.Hints
}

func loadViewFixture(t *testing.T, name string, v6 bool, hints model.Hints) *viewFixture {
	t.Helper()
	d, notes, err := readDump(string(readTestdata(t, name)))
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) > 0 {
		t.Fatalf("%s: notes %q (the test renders plain iptables-save)", name, notes)
	}
	fx := &viewFixture{fam: model.IPv4, d: d, hints: hints}
	if v6 {
		fx.fam, fx.tag = model.IPv6, "ip6 "
	}
	for _, tb := range d {
		tb.last = nil // chain() must look chains up: the test replaces them
	}
	return fx
}

// render prints the tables as iptables-save text (rules as they were
// written; iptables-save fixtures hold only -A lines).
func (fx *viewFixture) render() []byte {
	var b strings.Builder
	for _, name := range []string{"nat", "filter"} {
		tb := fx.d[name]
		if tb == nil {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", name)
		names := make([]string, 0, len(tb.chains))
		for n := range tb.chains {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&b, ":%s - [0:0]\n", n)
		}
		for _, n := range names {
			for _, r := range tb.chains[n].rules {
				b.WriteString(r.text + "\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	return []byte(b.String())
}

// parse is the reference: a full Parse of the rendered tables.
func (fx *viewFixture) parse(t *testing.T) model.Observed {
	t.Helper()
	d := Dumps{IPv4: fx.render()}
	if fx.fam == model.IPv6 {
		d = Dumps{IPv6: d.IPv4}
	}
	obs, err := Parse(d, fx.hints)
	if err != nil {
		t.Fatalf("reference parse: %v\n%s", err, d.IPv4)
	}
	return obs
}

// setChain replaces (or creates) a chain with rule lines, as readChain does:
// a new chain object, KUBE-MARK-MASQ jumps dropped.
func (fx *viewFixture) setChain(t *testing.T, table, name string, lines []string) {
	t.Helper()
	tb := fx.d[table]
	ch := &ipChain{name: name}
	for _, l := range lines {
		if isMarkMasqLine(l) {
			continue
		}
		toks, err := tokenize(l, nil)
		if err != nil || len(toks) < 2 || toks[1] != name {
			t.Fatalf("bad test rule %q: %v", l, err)
		}
		r := new(ipRule)
		if err := parseRule(r, name, toks[2:], l); err != nil {
			t.Fatalf("test rule %q: %v", l, err)
		}
		ch.rules = append(ch.rules, r)
	}
	if old := tb.chains[name]; old != nil {
		old.dead = true
	}
	tb.chains[name] = ch
}

func (fx *viewFixture) delChain(table, name string) {
	if old := fx.d[table].chains[name]; old != nil {
		old.dead = true
	}
	delete(fx.d[table].chains, name)
}

func (fx *viewFixture) lines(table, name string) []string {
	var out []string
	if c := fx.d[table].chains[name]; c != nil {
		for _, r := range c.rules {
			out = append(out, r.text)
		}
	}
	return out
}

func (fx *viewFixture) chainsWith(table, prefix string) []string {
	var out []string
	for n := range fx.d[table].chains {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func (fx *viewFixture) view() *ipView {
	return newIPView(fx.fam, fx.tag, fx.d, newParseIndex(fx.hints), nil)
}

func viewObserved(v *ipView) model.Observed {
	obs := model.Observed{Datapath: model.ModeIPTables, Frontends: map[model.Frontend]model.Verdict{}, Warnings: v.warnings}
	v.frontends(obs.Frontends)
	return obs
}

// sameObs compares an incremental result with the reference.
func sameObs(t *testing.T, step string, got, want model.Observed) {
	t.Helper()
	if reflect.DeepEqual(got.Frontends, want.Frontends) && slices.Equal(got.Warnings, want.Warnings) {
		return
	}
	for f, w := range want.Frontends {
		if g, ok := got.Frontends[f]; !ok {
			t.Errorf("%s: view misses %s %s", step, f.Kind, f)
		} else if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s %s:\nview %+v\nfull %+v", step, f.Kind, f, g, w)
		}
	}
	for f := range got.Frontends {
		if _, ok := want.Frontends[f]; !ok {
			t.Errorf("%s: view has extra %s %s", step, f.Kind, f)
		}
	}
	if !slices.Equal(got.Warnings, want.Warnings) {
		t.Errorf("%s: warnings differ:\nview %q\nfull %q", step, got.Warnings, want.Warnings)
	}
	t.FailNow()
}

// diffFrontends names the frontends whose verdict differs between a and b.
func diffFrontends(a, b map[model.Frontend]model.Verdict) map[model.Frontend]bool {
	out := map[model.Frontend]bool{}
	for f, v := range a {
		if w, ok := b[f]; !ok || !reflect.DeepEqual(v, w) {
			out[f] = true
		}
	}
	for f := range b {
		if _, ok := a[f]; !ok {
			out[f] = true
		}
	}
	return out
}

// TestViewMatchesFullWalk: random chain mutations of the kind kube-proxy
// makes (and a few it never makes: loops, rules the walk does not
// understand), applied to a parsed fixture and handed to the view as the
// chains they touched; after each, the view's state equals a full Parse of
// the tables (verdicts, evidence, warnings in order) and the frontends the
// update names are exactly those whose verdict differs.
func TestViewMatchesFullWalk(t *testing.T) {
	for _, tc := range []struct {
		name  string
		v6    bool
		hints model.Hints
	}{
		{"worker-a.iptables-save", false, model.Hints{}},
		{"stale.worker-a.iptables-save", false, model.Hints{}},
		{"large-cluster.iptables-save", false, largeClusterOptions()},
		{"large-cluster.iptables-save", false, model.Hints{}},
		{"stale-chains.iptables-save", false, model.Hints{}},
		{"dualstack.v4.iptables-save", false, model.Hints{}},
		{"dualstack.v6.iptables-save", true, model.Hints{}},
	} {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%s/hints=%v/seed=%d", tc.name, len(tc.hints.ServicePorts) > 0, seed), func(t *testing.T) {
				fx := loadViewFixture(t, tc.name, tc.v6, tc.hints)
				v := fx.view()
				prev := fx.parse(t)
				sameObs(t, "initial", viewObserved(v), prev)
				rng := rand.New(rand.NewPCG(seed, 7))
				incremental := 0
				for i := 0; i < 60; i++ {
					name, nat, filter := fx.mutate(t, rng)
					if name == "" {
						continue
					}
					step := fmt.Sprintf("step %d (%s)", i, name)
					before := viewObserved(v)
					evals := v.evals
					reach := map[*ipGroup]bool{}
					for _, c := range nat {
						v.byChain[c].each(func(g *ipGroup) { reach[g] = true })
					}
					entry := len(filter) > 0 || slices.Contains(nat, chainServices) || slices.Contains(nat, chainNodePorts)
					d, ok := v.update(nat, filter)
					if !ok {
						v.build()
					} else {
						incremental++
					}
					want := fx.parse(t)
					got := viewObserved(v)
					sameObs(t, step, got, want)
					if ok {
						changed := map[model.Frontend]bool{}
						for _, f := range d.gone {
							changed[f] = true
						}
						for _, fv := range d.set {
							changed[fv.f] = true
						}
						if diff := diffFrontends(before.Frontends, want.Frontends); !reflect.DeepEqual(changed, diff) {
							t.Fatalf("%s: update names %v, the verdicts that differ are %v", step, changed, diff)
						}
						if d.warnings != !slices.Equal(before.Warnings, want.Warnings) && !d.warnings {
							t.Fatalf("%s: warnings changed but the update did not say so", step)
						}
						if n := v.evals - evals; !entry && n > len(reach) {
							t.Errorf("%s: %d groups re-resolved, %d reach the chains", step, n, len(reach))
						}
					}
					prev = want
				}
				_ = prev
				if incremental < 20 {
					t.Errorf("only %d of the updates were incremental", incremental)
				}
			})
		}
	}
}

// mutate applies one random change and returns its name and the nat and
// filter chains it touched (as a change event would name them).
func (fx *viewFixture) mutate(t *testing.T, rng *rand.Rand) (string, []string, []string) {
	t.Helper()
	svcs := fx.chainsWith("nat", chainPrefixSVC)
	seps := fx.chainsWith("nat", chainPrefixSEP)
	pick := func(s []string) string {
		if len(s) == 0 {
			return ""
		}
		return s[rng.IntN(len(s))]
	}
	ip := "10.96.0.10"
	if fx.fam == model.IPv6 {
		ip = "fd00:10:96::10"
	}
	for _, svc := range svcs { // loops do not last: while one is in, every update is a full walk
		loop := "-A " + svc + " -j " + svc
		if ls := fx.lines("nat", svc); slices.Contains(ls, loop) && rng.IntN(2) == 0 {
			fx.setChain(t, "nat", svc, slices.DeleteFunc(slices.Clone(ls), func(l string) bool { return l == loop }))
			return "remove loop from " + svc, []string{svc}, nil
		}
	}
	switch rng.IntN(12) {
	case 0: // flush a service chain
		svc := pick(svcs)
		if svc == "" {
			return "", nil, nil
		}
		fx.setChain(t, "nat", svc, nil)
		return "flush " + svc, []string{svc}, nil
	case 1: // drop one endpoint jump of a service chain
		svc := pick(svcs)
		ls := fx.lines("nat", svc)
		if len(ls) == 0 {
			return "", nil, nil
		}
		i := rng.IntN(len(ls))
		fx.setChain(t, "nat", svc, slices.Delete(slices.Clone(ls), i, i+1))
		return "drop rule of " + svc, []string{svc}, nil
	case 2: // add an endpoint: a new KUBE-SEP chain and a jump to it
		svc := pick(svcs)
		if svc == "" {
			return "", nil, nil
		}
		sep := fmt.Sprintf("KUBE-SEP-NDTEST%010d", rng.IntN(1e9))
		dst := fmt.Sprintf("10.99.%d.%d:8080", rng.IntN(250), rng.IntN(250))
		if fx.fam == model.IPv6 {
			dst = fmt.Sprintf("[fd00:99::%x]:8080", rng.IntN(60000))
		}
		fx.setChain(t, "nat", sep, []string{"-A " + sep + " -p tcp -m tcp -j DNAT --to-destination " + dst})
		fx.setChain(t, "nat", svc, append(fx.lines("nat", svc), "-A "+svc+" -j "+sep))
		return "add endpoint to " + svc, []string{sep, svc}, nil
	case 3: // an endpoint chain deleted (its jumps left dangling)
		sep := pick(seps)
		if sep == "" {
			return "", nil, nil
		}
		fx.delChain("nat", sep)
		return "delete " + sep, []string{sep}, nil
	case 4: // an endpoint chain rewritten to another backend
		sep := pick(seps)
		if sep == "" {
			return "", nil, nil
		}
		dst := fmt.Sprintf("10.98.0.%d:80", rng.IntN(250))
		if fx.fam == model.IPv6 {
			dst = fmt.Sprintf("[fd00:98::%x]:80", rng.IntN(60000))
		}
		fx.setChain(t, "nat", sep, []string{"-A " + sep + " -p tcp -m tcp -j DNAT --to-destination " + dst})
		return "rewrite " + sep, []string{sep}, nil
	case 5, 6: // KUBE-SERVICES rewritten (kube-proxy: every sync, in map order), one rule removed
		ls := fx.lines("nat", chainServices)
		if len(ls) == 0 {
			return "", nil, nil
		}
		ls = slices.Clone(ls)
		rng.Shuffle(len(ls), func(i, j int) { ls[i], ls[j] = ls[j], ls[i] })
		for i, l := range ls { // the node-port jump stays last
			if strings.HasSuffix(l, "-j "+chainNodePorts) {
				ls = append(slices.Delete(ls, i, i+1), l)
				break
			}
		}
		if rng.IntN(2) == 0 && len(ls) > 1 {
			i := rng.IntN(len(ls) - 1)
			ls = slices.Delete(ls, i, i+1)
		}
		fx.setChain(t, "nat", chainServices, ls)
		return "rewrite nat KUBE-SERVICES", []string{chainServices}, nil
	case 7: // a service's KUBE-SERVICES rule added (first in the chain)
		svc := pick(svcs)
		if svc == "" {
			return "", nil, nil
		}
		port := 1000 + rng.IntN(20)
		rule := fmt.Sprintf("-A KUBE-SERVICES -d %s/%d -p tcp -m comment --comment \"ndtest/s%d:p cluster IP\" -m tcp --dport %d -j %s",
			ip, map[bool]int{false: 32, true: 128}[fx.fam == model.IPv6], port, port, svc)
		fx.setChain(t, "nat", chainServices, append([]string{rule}, fx.lines("nat", chainServices)...))
		return "add KUBE-SERVICES rule", []string{chainServices}, nil
	case 8: // filter REJECT rule added or removed
		for _, c := range []string{chainServices, chainExtServices} {
			ls := fx.lines("filter", c)
			if len(ls) > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(len(ls))
				fx.setChain(t, "filter", c, slices.Delete(slices.Clone(ls), i, i+1))
				return "remove filter rule of " + c, nil, []string{c}
			}
		}
		port := 1000 + rng.IntN(20)
		rule := fmt.Sprintf("-A KUBE-SERVICES -d %s/%d -p tcp -m comment --comment \"ndtest/s%d:p has no endpoints\" -m tcp --dport %d -j REJECT --reject-with icmp-port-unreachable",
			ip, map[bool]int{false: 32, true: 128}[fx.fam == model.IPv6], port, port)
		fx.setChain(t, "filter", chainServices, append(fx.lines("filter", chainServices), rule))
		return "add filter REJECT", nil, []string{chainServices}
	case 9: // a rule the walk does not understand (warnings move with it)
		svc := pick(svcs)
		if svc == "" {
			return "", nil, nil
		}
		if rng.IntN(2) == 0 {
			fx.setChain(t, "nat", chainServices, append([]string{"-A KUBE-SERVICES -p tcp -j " + svc}, fx.lines("nat", chainServices)...))
			return "add a KUBE-SERVICES rule without address", []string{chainServices}, nil
		}
		fx.setChain(t, "nat", svc, append(fx.lines("nat", svc), "-A "+svc+" -p tcp -j DNAT --to-destination bogus"))
		return "add a bad DNAT to " + svc, []string{svc}, nil
	case 10: // a jump loop, or its removal
		svc := pick(svcs)
		if svc == "" {
			return "", nil, nil
		}
		ls := fx.lines("nat", svc)
		loop := "-A " + svc + " -j " + svc
		if i := slices.Index(ls, loop); i >= 0 {
			fx.setChain(t, "nat", svc, slices.Delete(slices.Clone(ls), i, i+1))
			return "remove loop from " + svc, []string{svc}, nil
		}
		if rng.IntN(3) > 0 {
			return "", nil, nil // loops are rare: most steps stay incremental
		}
		fx.setChain(t, "nat", svc, append(slices.Clone(ls), loop))
		return "loop in " + svc, []string{svc}, nil
	default: // a chain nothing reaches
		fx.setChain(t, "nat", "KUBE-SEP-UNREACHED00000", []string{"-A KUBE-SEP-UNREACHED00000 -p tcp -m tcp -j DNAT --to-destination bogus"})
		return "unreached chain", []string{"KUBE-SEP-UNREACHED00000"}, nil
	}
}

// TestViewServiceChangeResolvesOnlyItsFrontends: rewriting one service's
// chains re-resolves only the groups that reach them; rewriting nat
// KUBE-SERVICES unchanged (reordered) re-resolves nothing.
func TestViewServiceChangeResolvesOnlyItsFrontends(t *testing.T) {
	fx := loadViewFixture(t, "worker-a.iptables-save", false, model.Hints{})
	v := fx.view()
	svc := ""
	for _, c := range fx.chainsWith("nat", chainPrefixSVC) {
		if s := v.byChain[c]; s.len() > 0 && len(fx.lines("nat", c)) > 0 {
			svc = c
			break
		}
	}
	reach := v.byChain[svc].len()
	ls := fx.lines("nat", svc)
	fx.setChain(t, "nat", svc, ls[:len(ls)-1])
	e0 := v.evals
	d, ok := v.update([]string{svc}, nil)
	if !ok {
		t.Fatal("full walk for a service chain change")
	}
	if n := v.evals - e0; n != reach || n == 0 {
		t.Errorf("re-resolved %d groups, want the %d that reach %s", n, reach, svc)
	}
	if len(d.set)+len(d.gone) == 0 || len(d.set)+len(d.gone) > 2*reach {
		t.Errorf("changed %d frontends (set %d, gone %d) for %d groups", len(d.set)+len(d.gone), len(d.set), len(d.gone), reach)
	}
	sameObs(t, "service chain", viewObserved(v), fx.parse(t))

	ls = slices.Clone(fx.lines("nat", chainServices))
	slices.Reverse(ls[:len(ls)-1])
	fx.setChain(t, "nat", chainServices, ls)
	e0 = v.evals
	d, ok = v.update([]string{chainServices}, nil)
	if !ok || v.evals != e0 || len(d.set)+len(d.gone) != 0 {
		t.Errorf("reordered KUBE-SERVICES: ok %v, %d groups re-resolved, %d changed", ok, v.evals-e0, len(d.set)+len(d.gone))
	}
	sameObs(t, "reordered KUBE-SERVICES", viewObserved(v), fx.parse(t))
}
