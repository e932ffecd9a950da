package iptables

import (
	"slices"

	"github.com/netdrift/netdrift/internal/model"
)

// ipView is one family's walk (walk.go) kept per frontend, with the nat
// chains each frontend's verdict depends on, so that a change event naming
// a few chains re-resolves only the frontends that reach them instead of
// the whole table (docs/architecture.md, "Work per change, not per
// cluster"); nftables/view.go does the same for the nftables reader.
//
// The unit of evaluation is a group: the entry rules (steps) about one
// address, port and protocol (node ports: port and protocol). Everything
// the walk decides across rules stays inside a group: the first capture of
// a frontend wins, a filter rule's external-vs-load-balancer kind comes from
// the nat rules for the same address, a KUBE-PROXY-FIREWALL rule attaches to
// the load balancer of its address. Rules that name no frontend (not
// understood) are groups of their own, keyed by their text.
//
// The walk's answer is a function of each group's steps in rule order and
// of the chain results they reach, which are kept on the chains
// (ipChain.res) and shared between groups. A chain's result depends only on
// the chains below it, unless the walk meets a jump loop or nesting near
// maxChainDepth (walker.odd): then the order chains are first reached
// matters, and every update is a full walk.
//
// Warnings: each step keeps the warnings it gave (those of every chain it
// reaches included, cached or not), each frontend those of its verdict;
// assembled in rule order and deduplicated, they are the full walk's
// warnings, in its order: a warning a cached chain gives again was given
// first where the full walk first resolved that chain.
//
// Entry chains (nat KUBE-SERVICES and KUBE-NODEPORTS, the filter chains
// kube-proxy's REJECT/DROP rules live in) are diffed rule by rule when they
// change: their rules are grouped again (one pass over the chain: kube-proxy
// rewrites these chains on every sync, in no particular order) and only the
// groups whose rule sequence differs are re-resolved.
type ipView struct {
	fam         model.IPFamily
	tag         string
	nat, filter *ipTable
	idx         *parseIndex
	head        []string // warnings before the walk: missing tables, notes

	pre       []string // head, and the missing KUBE-SERVICES warning
	mid       []string // nat KUBE-NODEPORTS not reached from KUBE-SERVICES
	services  bool     // nat KUBE-SERVICES exists
	jumps     bool     // nat KUBE-SERVICES jumps to KUBE-NODEPORTS
	npSkipped bool     // KUBE-NODEPORTS has rules but is not reached
	steps     [nPhases][]*ipStep
	groups    map[groupKey]*ipGroup
	byChain   map[string]groupSet
	warned    int  // groups with a warning
	odd       bool // see walker.odd
	warnings  []string
	// plain: when odd, the full walk's verdicts (in rule order, walker.run),
	// which the groups' evaluation order may not give.
	plain map[model.Frontend]model.Verdict

	evals int // groups evaluated (tests and stats)

	scratch *rephaseState // rephase's, kept between calls
}

// Phases of the walk, in its order (walker.run).
const (
	phNatServices = iota
	phNatNodePorts
	phFilterServices
	phFilterExt
	phFilterNodePorts
	phFirewall
	nPhases
)

var phaseChain = [nPhases]struct{ table, chain string }{
	{"nat", chainServices}, {"nat", chainNodePorts},
	{"filter", chainServices}, {"filter", chainExtServices}, {"filter", chainNodePorts}, {"filter", chainProxyFW},
}

// groupKey names a group: an address/port/protocol, or a rule's text.
type groupKey struct {
	k    frontKey
	text string
}

// ipStep is one entry rule and what walking it gave.
type ipStep struct {
	r       *ipRule
	g       *ipGroup
	warns   []string
	creates []model.Frontend // the entry this step created (walker.order)
}

type ipGroup struct {
	key    groupKey
	steps  [nPhases][]*ipStep
	fronts []ipFront // in creation order
	deps   []string  // nat chains looked at
	warned bool
}

type ipFront struct {
	f     model.Frontend
	v     model.Verdict
	warns []string
}

func (g *ipGroup) empty() bool {
	for _, s := range g.steps {
		if len(s) > 0 {
			return false
		}
	}
	return true
}

// newIPView walks a family's tables (chain results already on them are
// discarded). notes are warnings about the dump as a whole.
func newIPView(fam model.IPFamily, tag string, d ipDump, idx *parseIndex, notes []string) *ipView {
	w := newWalker(fam, tag, d, idx)
	v := &ipView{fam: fam, tag: tag, nat: w.nat, filter: w.filter, idx: idx,
		head: slices.Clip(append(w.warnings, notes...))}
	v.build()
	return v
}

func (v *ipView) walker() *walker {
	return &walker{fam: v.fam, tag: v.tag, nat: v.nat, filter: v.filter, idx: v.idx,
		entries: map[model.Frontend]*entry{}, track: true}
}

// build walks everything.
func (v *ipView) build() {
	for _, c := range v.nat.chains {
		c.reset()
	}
	v.groups, v.byChain, v.warned, v.odd = map[groupKey]*ipGroup{}, map[string]groupSet{}, 0, false
	v.entryState()
	for p := range v.steps {
		v.steps[p] = nil
		for _, r := range v.phaseRules(p) {
			key, ok := v.keyOf(p, r)
			if !ok {
				continue
			}
			g := v.groups[key]
			if g == nil {
				g = &ipGroup{key: key}
				v.groups[key] = g
			}
			s := &ipStep{r: r, g: g}
			g.steps[p] = append(g.steps[p], s)
			v.steps[p] = append(v.steps[p], s)
		}
	}
	for _, g := range v.groups {
		v.eval(g)
	}
	v.plain = nil
	if v.odd {
		for _, c := range v.nat.chains {
			c.reset()
		}
		w := v.walker()
		w.track = false
		w.warnings = slices.Clone(v.head)
		w.run()
		v.plain, v.warnings = w.verdicts(), slices.Clip(w.warnings)
		return
	}
	v.assemble()
}

// entryState reads what the walk decides about the table as a whole.
func (v *ipView) entryState() {
	w := v.walker()
	v.services = v.nat.chain(chainServices) != nil
	if !v.services {
		w.warnf("nat table has no %s chain: kube-proxy (iptables mode) state absent", chainServices)
	}
	v.pre = slices.Clip(append(slices.Clip(v.head), w.warnings...))
	v.jumps = false
	for _, r := range v.nat.rules(chainServices) {
		if r.target() == chainNodePorts {
			v.jumps = true
		}
	}
	v.npSkipped = len(v.nat.rules(chainNodePorts)) > 0 && !v.jumps
	w.warnings = nil
	if v.npSkipped {
		w.warnf("nat %s is not reached from %s: node ports are not programmed", chainNodePorts, chainServices)
	}
	v.mid = w.warnings
}

// phaseRules returns the rules a phase walks.
func (v *ipView) phaseRules(p int) []*ipRule {
	if p == phNatNodePorts && v.npSkipped {
		return nil
	}
	t := v.nat
	if phaseChain[p].table == "filter" {
		t = v.filter
	}
	return t.rules(phaseChain[p].chain)
}

// keyOf tells the group of an entry rule; false: the walk ignores the rule
// whatever the other chains hold.
func (v *ipView) keyOf(p int, r *ipRule) (groupKey, bool) {
	var k frontKey
	var ok bool
	switch p {
	case phNatServices, phNatNodePorts:
		if r.target() == "" || isMarkChain(r.target()) || p == phNatServices && r.target() == chainNodePorts {
			return groupKey{}, false
		}
		k, ok = ruleKey(r, p == phNatServices)
	case phFirewall:
		k, ok = ruleKey(r, true)
		if !ok || r.target() != "DROP" {
			return groupKey{}, false
		}
	default:
		if r.target() != "REJECT" && r.target() != "DROP" {
			return groupKey{}, false
		}
		k, _, ok = filterKey(r)
	}
	if !ok {
		return groupKey{text: phaseChain[p].table + "\x00" + r.text}, true
	}
	return groupKey{k: k}, true
}

// eval walks one group's steps, in rule order.
func (v *ipView) eval(g *ipGroup) {
	v.evals++
	w := v.walker()
	warned := false
	for p := range g.steps {
		for _, s := range g.steps[p] {
			w0, o0 := len(w.warnings), len(w.order)
			w.step(p, s.r)
			s.warns, s.creates = nil, nil
			if len(w.warnings) > w0 {
				s.warns, warned = slices.Clone(w.warnings[w0:]), true
			}
			if len(w.order) > o0 {
				s.creates = slices.Clone(w.order[o0:])
			}
		}
	}
	g.fronts = g.fronts[:0:0]
	for _, f := range w.order {
		w0 := len(w.warnings)
		fv := ipFront{f: f, v: w.verdict(f, w.entries[f])}
		if len(w.warnings) > w0 {
			fv.warns, warned = slices.Clone(w.warnings[w0:]), true
		}
		g.fronts = append(g.fronts, fv)
	}
	if g.warned != warned {
		if warned {
			v.warned++
		} else {
			v.warned--
		}
	}
	g.warned = warned
	v.setDeps(g, dedupe(w.deps))
	v.odd = v.odd || w.odd
}

// setDeps replaces a group's dependencies. A chain no group reaches any
// more forgets its result: nothing would tell it to when the chains below
// it change.
func (v *ipView) setDeps(g *ipGroup, deps []string) {
	for _, c := range g.deps {
		m := v.byChain[c]
		m.del(g)
		if m.len() == 0 {
			delete(v.byChain, c)
			if ch := v.nat.chains[c]; ch != nil {
				ch.reset()
			}
		} else {
			v.byChain[c] = m
		}
	}
	g.deps = slices.Clip(deps)
	for _, c := range deps {
		m := v.byChain[c]
		m.add(g)
		v.byChain[c] = m
	}
}

// groupSet is the groups that reach one chain: most chains are reached by
// one or two, so a short list, and a map past a few (a map per chain
// would be a large share of the reader's heap).
type groupSet struct {
	few  []*ipGroup
	many map[*ipGroup]struct{}
}

const groupSetFew = 8

func (s groupSet) len() int { return len(s.few) + len(s.many) }

func (s *groupSet) add(g *ipGroup) {
	if s.many != nil {
		s.many[g] = struct{}{}
		return
	}
	if slices.Contains(s.few, g) {
		return
	}
	if len(s.few) < groupSetFew {
		s.few = append(s.few, g)
		return
	}
	s.many = make(map[*ipGroup]struct{}, 2*groupSetFew)
	for _, o := range s.few {
		s.many[o] = struct{}{}
	}
	s.many[g], s.few = struct{}{}, nil
}

func (s *groupSet) del(g *ipGroup) {
	if s.many != nil {
		delete(s.many, g)
		return
	}
	if i := slices.Index(s.few, g); i >= 0 {
		s.few = slices.Delete(s.few, i, i+1)
	}
}

// each calls fn for every group.
func (s groupSet) each(fn func(*ipGroup)) {
	for _, g := range s.few {
		fn(g)
	}
	for g := range s.many {
		fn(g)
	}
}

func (c *ipChain) reset() { c.res, c.done, c.busy = chainResult{}, false, false }

// step walks one entry rule of a phase.
func (w *walker) step(p int, r *ipRule) {
	switch p {
	case phNatServices:
		w.natServiceRule(r)
	case phNatNodePorts:
		w.natNodePortRule(r)
	case phFirewall:
		w.firewallRule(r)
	default:
		w.filterRule(r)
	}
}

// assemble gives the warnings in the full walk's order (walker.run, then
// walker.verdicts).
func (v *ipView) assemble() {
	ws := slices.Clone(v.pre)
	for p := range v.steps {
		if p == phNatNodePorts {
			ws = append(ws, v.mid...)
		}
		if v.warned == 0 {
			continue
		}
		for _, s := range v.steps[p] {
			ws = append(ws, s.warns...)
		}
	}
	if v.warned > 0 {
		for p := range v.steps {
			for _, s := range v.steps[p] {
				for _, f := range s.creates {
					for i := range s.g.fronts {
						if s.g.fronts[i].f == f {
							ws = append(ws, s.g.fronts[i].warns...)
						}
					}
				}
			}
		}
	}
	v.warnings = slices.Clip(dedupe(ws))
}

// frontends adds the family's verdicts to m.
func (v *ipView) frontends(m map[model.Frontend]model.Verdict) {
	if v.plain != nil {
		for f, vd := range v.plain {
			m[f] = vd
		}
		return
	}
	for _, g := range v.groups {
		for _, fv := range g.fronts {
			m[fv.f] = fv.v
		}
	}
}

// ipDelta is what an update changed in one family.
type ipDelta struct {
	gone     []model.Frontend // observed before, not now
	set      []ipFront        // new or re-resolved verdicts
	warnings bool             // the warnings were assembled again
}

// update re-resolves the frontends that depend on the named chains (their
// rules were re-read into the tables). false: the update needs a full walk
// (build), which the caller runs.
func (v *ipView) update(natChains, filterChains []string) (ipDelta, bool) {
	if v.odd {
		return ipDelta{}, false
	}
	var d ipDelta
	dirty := map[*ipGroup]bool{}
	entry := false
	rephase := func(p int) {
		entry = true
		v.rephase(p, dirty)
	}
	for _, c := range natChains {
		v.byChain[c].each(func(g *ipGroup) { dirty[g] = true })
		if c == chainServices || c == chainNodePorts {
			services, jumps, npSkipped := v.services, v.jumps, v.npSkipped
			v.entryState()
			if v.services != services || v.jumps != jumps || v.npSkipped != npSkipped {
				return ipDelta{}, false
			}
		}
	}
	for _, c := range natChains {
		for p := phNatServices; p <= phNatNodePorts; p++ {
			if c == phaseChain[p].chain {
				rephase(p)
			}
		}
	}
	for _, c := range filterChains {
		for p := phFilterServices; p < nPhases; p++ {
			if c == phaseChain[p].chain {
				rephase(p)
			}
		}
	}
	if len(dirty) == 0 && !entry {
		return d, true
	}
	for _, c := range natChains {
		if ch := v.nat.chains[c]; ch != nil {
			ch.reset()
		}
	}
	warnsMoved := entry && v.warned > 0
	old := make(map[*ipGroup][]ipFront, len(dirty))
	for g := range dirty {
		for _, c := range g.deps {
			if ch := v.nat.chains[c]; ch != nil {
				ch.reset()
			}
		}
		old[g] = g.fronts
		warnsMoved = warnsMoved || g.warned
	}
	for g := range dirty {
		if g.empty() {
			v.setDeps(g, nil)
			delete(v.groups, g.key)
			if g.warned {
				v.warned--
			}
			g.fronts = nil
		} else {
			v.eval(g)
		}
		if v.odd {
			return ipDelta{}, false
		}
		warnsMoved = warnsMoved || g.warned
		for _, o := range old[g] {
			if !slices.ContainsFunc(g.fronts, func(n ipFront) bool { return n.f == o.f }) {
				d.gone = append(d.gone, o.f)
			}
		}
		for _, n := range g.fronts {
			i := slices.IndexFunc(old[g], func(o ipFront) bool { return o.f == n.f })
			if i < 0 || !old[g][i].v.Equal(n.v) {
				d.set = append(d.set, n)
			}
		}
	}
	if warnsMoved {
		v.assemble()
		d.warnings = true
	}
	return d, true
}

// rephase groups the rules of an entry phase again, after its chain was
// re-read: groups whose rules in the phase are the same (same text, same
// order) keep their steps and what they gave; the others are marked dirty.
//
// kube-proxy's iptables mode writes KUBE-SERVICES in no fixed order, so
// every sync reorders it and every sync rephases it whole (one rule per
// service port and more): the phase's rules are chained per group in scratch
// space the view keeps, and only groups that changed get new steps.
func (v *ipView) rephase(p int, dirty map[*ipGroup]bool) {
	rs := v.rephaseScratch()
	defer rs.done()
	for _, r := range v.phaseRules(p) {
		if key, ok := v.keyOf(p, r); ok {
			rs.add(key, r)
		}
	}
	news := make([]*ipStep, len(rs.rules))
	for _, s := range v.steps[p] {
		g := s.g
		e, seen := rs.groups[g.key]
		if e.handled {
			continue
		}
		if !seen { // no rule of the group left in the phase
			rs.groups[g.key] = rephaseGroup{head: -1, handled: true}
			if len(g.steps[p]) > 0 {
				g.steps[p] = g.steps[p][:0]
				dirty[g] = true
			}
			continue
		}
		rs.groups[g.key] = rephaseGroup{head: e.head, handled: true}
		olds, same := g.steps[p], true
		i, j := 0, e.head
		for ; same && j >= 0; i, j = i+1, rs.next[j] {
			same = i < len(olds) && olds[i].r.text == rs.rules[j].text
		}
		if same && i == len(olds) { // keep the steps and what they gave
			for i, j := 0, e.head; j >= 0; i, j = i+1, rs.next[j] {
				olds[i].r, news[j] = rs.rules[j], olds[i]
			}
			continue
		}
		g.steps[p] = rs.newSteps(g, e.head, news)
		dirty[g] = true
	}
	for j, r := range rs.rules { // groups new to the phase
		if news[j] != nil {
			continue
		}
		key, _ := v.keyOf(p, r)
		e := rs.groups[key]
		rs.groups[key] = rephaseGroup{head: e.head, handled: true}
		g := v.groups[key]
		if g == nil {
			g = &ipGroup{key: key}
			v.groups[key] = g
		}
		g.steps[p] = rs.newSteps(g, e.head, news)
		dirty[g] = true
	}
	v.steps[p] = news
}
