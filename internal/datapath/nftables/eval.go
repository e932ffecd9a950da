package nftables

import (
	"fmt"
	"net/netip"

	"github.com/netdrift/netdrift/internal/model"
)

// nftMaxDepth bounds chain nesting (kube-proxy uses at most four levels).
const nftMaxDepth = 16

// nftOutcome is where a new connection from outside the cluster, with no
// session-affinity entry, ends up when it enters a chain. Action "" means it
// falls through (no verdict: the packet leaves the chain undecided).
type nftOutcome struct {
	Action   model.Action
	Backends []netip.AddrPort
	Evidence []string
	Warnings []string
}

func (o nftOutcome) decided() bool { return o.Action != "" }

// nftEvaluator walks chains of one table. Outcomes do not depend on the
// caller, so they are memoised per chain.
type nftEvaluator struct {
	t      *nftTable
	memo   map[string]nftOutcome
	active map[string]bool
	// deps records, per evaluated chain, every chain its outcome depends on
	// (itself included); cur collects them for the evaluation under way, so
	// that a destination knows which chain changes can change its verdict.
	deps map[string][]string
	cur  *[]string
}

func newNFTEvaluator(t *nftTable) *nftEvaluator {
	return &nftEvaluator{t: t, memo: map[string]nftOutcome{}, active: map[string]bool{}, deps: map[string][]string{}}
}

// tracing evaluates fn and returns the chains it depended on.
func (ev *nftEvaluator) tracing(fn func()) []string {
	var got []string
	prev := ev.cur
	ev.cur = &got
	fn()
	ev.cur = prev
	if prev != nil {
		*prev = append(*prev, got...)
	}
	return got
}

// verdict evaluates a verdict found in a map element or a vmap.
func (ev *nftEvaluator) verdict(v nftVerdict, depth int) nftOutcome {
	switch v.Kind {
	case nftVerdictGoto, nftVerdictJump:
		return ev.chain(v.Target, depth+1)
	case nftVerdictDrop:
		return nftOutcome{Action: model.Drop}
	case nftVerdictReject:
		return nftOutcome{Action: model.Reject}
	}
	// accept (no dnat), return, continue: the connection is not redirected.
	return nftOutcome{}
}

func (ev *nftEvaluator) chain(name string, depth int) nftOutcome {
	if o, ok := ev.memo[name]; ok {
		if ev.cur != nil {
			*ev.cur = append(*ev.cur, ev.deps[name]...)
		}
		return o
	}
	var o nftOutcome
	deps := ev.tracing(func() { o = ev.chainOnce(name, depth) })
	ev.deps[name] = append(deps, name)
	if ev.cur != nil {
		*ev.cur = append(*ev.cur, name)
	}
	return o
}

func (ev *nftEvaluator) chainOnce(name string, depth int) nftOutcome {
	if depth > nftMaxDepth || ev.active[name] {
		return nftOutcome{Warnings: []string{fmt.Sprintf("chain %s: loop or nesting deeper than %d", name, nftMaxDepth)}}
	}
	rules, ok := ev.t.Chains[name]
	if !ok {
		return nftOutcome{Warnings: []string{fmt.Sprintf("chain %s is referenced but does not exist", name)}}
	}
	ev.active[name] = true
	o := ev.rules(name, rules, depth)
	delete(ev.active, name)
	ev.memo[name] = o
	return o
}

// rules runs a chain's rules in order, skipping conditional ones.
func (ev *nftEvaluator) rules(name string, rules []nftRule, depth int) nftOutcome {
	var warns []string
	for _, r := range rules {
		if r.Conditional {
			continue
		}
		line := name + ": " + r.String()
		o, final := ev.rule(r, depth)
		o.Warnings = append(warns, o.Warnings...)
		if final {
			o.Evidence = append([]string{line}, o.Evidence...)
			return o
		}
		warns = o.Warnings
	}
	if len(rules) == 0 {
		return nftOutcome{Evidence: []string{name + ": (empty chain)"}, Warnings: warns}
	}
	return nftOutcome{Evidence: []string{name + ": no unconditional verdict (falls through)"}, Warnings: warns}
}

// rule evaluates one unconditional rule; final reports whether the chain
// stops here.
func (ev *nftEvaluator) rule(r nftRule, depth int) (nftOutcome, bool) {
	switch {
	case len(r.DNAT) > 0:
		bs := append([]netip.AddrPort(nil), r.DNAT...)
		return nftOutcome{Action: model.Forward, Backends: model.SortBackends(bs)}, true
	case len(r.VMap) > 0:
		o := ev.vmap(r.VMap, depth)
		return o, o.decided() || r.VMap[0].Kind != nftVerdictJump
	}
	switch r.Verdict.Kind {
	case nftVerdictGoto:
		return ev.chain(r.Verdict.Target, depth+1), true
	case nftVerdictJump:
		o := ev.chain(r.Verdict.Target, depth+1)
		return o, o.decided()
	case nftVerdictReturn:
		return nftOutcome{}, true
	case nftVerdictDrop, nftVerdictReject, nftVerdictAccept:
		return ev.verdict(r.Verdict, depth), true
	}
	return nftOutcome{}, false
}

// vmap joins the outcomes of a numgen vmap: the union of the backends its
// targets forward to.
func (ev *nftEvaluator) vmap(vs []nftVerdict, depth int) nftOutcome {
	var out nftOutcome
	for _, v := range vs {
		o := ev.verdict(v, depth)
		out.Evidence = append(out.Evidence, o.Evidence...)
		out.Warnings = append(out.Warnings, o.Warnings...)
		switch o.Action {
		case model.Forward:
			out.Action = model.Forward
			out.Backends = append(out.Backends, o.Backends...)
		default:
			what := string(o.Action)
			if what == "" {
				what = "falls through"
			}
			out.Warnings = append(out.Warnings, fmt.Sprintf("numgen vmap target %s does not forward (%s)", v, what))
		}
	}
	out.Backends = model.SortBackends(out.Backends)
	return out
}
