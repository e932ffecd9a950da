package iptables

import (
	"net/netip"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// natServiceRule handles one nat KUBE-SERVICES rule: a cluster, external or
// load-balancer IP captured into a service chain.
func (w *walker) natServiceRule(r *ipRule) {
	if r.target() == "" || isMarkChain(r.target()) || !w.isChain(r.target()) {
		if isServiceChainTarget(r.target()) {
			w.warnf("nat %s rule jumps to missing chain %s: %s", r.chain, r.target(), r.text)
		}
		return // KUBE-MARK-MASQ and other bookkeeping
	}
	k, ok := w.ruleKey(r, true)
	if !ok {
		w.warnf("nat %s rule not understood (no single IP, protocol and port): %s", r.chain, r.text)
		return
	}
	kind, ok := w.natKind(r, k)
	if !ok {
		return
	}
	w.capture(model.NewFrontend(k.ip, k.port, k.proto, kind), r, true)
}

// natKind tells the frontend kind from the comment, else the target chain.
func (w *walker) natKind(r *ipRule, k frontKey) (model.FrontendKind, bool) {
	switch {
	case strings.HasSuffix(r.comment(), " cluster IP"):
		return model.ClusterIP, true
	case strings.HasSuffix(r.comment(), " external IP"):
		return model.ExternalIP, true
	case strings.HasSuffix(r.comment(), " loadbalancer IP"):
		return model.LoadBalancer, true
	}
	switch {
	case strings.HasPrefix(r.target(), chainPrefixSVC), strings.HasPrefix(r.target(), chainPrefixSVL):
		return model.ClusterIP, true
	case strings.HasPrefix(r.target(), chainPrefixFW):
		return model.LoadBalancer, true
	}
	if kind, ok := w.idx.kinds[k]; ok {
		return kind, true
	}
	w.warnf("cannot tell external IP from load-balancer IP for %s (no comment, unknown frontend); assuming external_ip", netip.AddrPortFrom(k.ip, k.port))
	return model.ExternalIP, true
}

// natNodePortRule handles one nat KUBE-NODEPORTS rule.
func (w *walker) natNodePortRule(r *ipRule) {
	if r.target() == "" || isMarkChain(r.target()) || !w.isChain(r.target()) {
		if isServiceChainTarget(r.target()) {
			w.warnf("nat %s rule jumps to missing chain %s: %s", r.chain, r.target(), r.text)
		}
		return
	}
	k, ok := w.ruleKey(r, false)
	if !ok {
		w.warnf("nat %s rule not understood (no protocol and port): %s", r.chain, r.text)
		return
	}
	general := r.dst() == "" || !isLoopbackNet(r.dst())
	if r.dst() != "" && general {
		w.warnf("nat %s rule limited to destination %s, treated as a node port: %s", r.chain, r.dst(), r.text)
	}
	w.capture(model.NewNodePort(k.port, k.proto, w.fam), r, general)
}

// capture records a nat rule that DNATs a frontend through r.target().
// The first general rule wins (iptables is first-match); localhost-only
// rules (127.0.0.0/8 node ports) add evidence and count only if no general
// rule exists.
func (w *walker) capture(f model.Frontend, r *ipRule, general bool) {
	e := w.entryFor(f)
	e.evidence = append(e.evidence, w.ev("nat", r))
	if e.general {
		w.warnf("%s %s captured twice in nat %s; the first rule wins: %s", f.Kind, f, r.chain, r.text)
		return
	}
	res := w.resolve(w.nat.chain(r.target()), 0)
	if e.natSeen && !general {
		return
	}
	e.natSeen, e.general, e.chain = true, general, r.target()
	e.backends = append(e.backends[:0], res.backends...)
	e.drop = res.drop && len(res.backends) == 0
	e.evidence = append(e.evidence, res.evidence...)
	if e.svc.IsZero() {
		e.svc = w.serviceOf(f, r, res)
	}
}

// serviceOf names the service port of a captured frontend: from the rule's
// comment, else the target chain's hash, else the target chain's comments.
func (w *walker) serviceOf(f model.Frontend, r *ipRule, res *chainResult) model.ServicePort {
	proto := f.Protocol
	_, hash := chainHashOf(r.target())
	if sp, ok := commentService(r.comment(), proto); ok {
		if hash != "" && ChainHash(sp) != hash && !(sp.Port == "" && legacyChainHash(sp) == hash) {
			w.warnf("comment names %s but chain %s is not its chain (hash %s)", KubeProxyPortName(sp), r.target(), ChainHash(sp))
		}
		return sp
	}
	if sp, ok := w.idx.byHash[hash]; ok && hash != "" && sp.Protocol == proto {
		return sp
	}
	if res.svc != nil {
		sp := *res.svc
		sp.Protocol = proto
		return sp
	}
	if sp, ok := w.idx.frontends[f]; ok {
		return sp
	}
	return model.ServicePort{}
}

// isChain reports whether a jump target is a chain of the nat table.
func (w *walker) isChain(name string) bool {
	w.dep(name)
	return w.nat.chain(name) != nil
}

// dep records a nat chain the walk looked at (tracking only).
func (w *walker) dep(name string) {
	if w.track {
		w.deps = append(w.deps, name)
	}
}

// isMarkChain reports KUBE-MARK-MASQ and KUBE-MARK-DROP: bookkeeping jumps
// (older kube-proxy versions put masquerade rules in KUBE-SERVICES).
func isMarkChain(t string) bool { return strings.HasPrefix(t, "KUBE-MARK-") }

func isServiceChainTarget(t string) bool {
	p, _ := chainHashOf(t)
	return p != ""
}

// resolve computes where traffic from outside the node entering chain c is
// DNATed to. EXT chains (and, before v1.24, XLB chains) skip
// source-conditional rules (pod and LOCAL sources short-circuit to the
// cluster-policy chain); FW chains follow their allowed sources. An
// unconditional jump to KUBE-MARK-DROP before any DNAT (an XLB chain with no
// local endpoints; the filter table drops marked packets) makes the result a
// drop. The result is kept on the chain.
func (w *walker) resolve(c *ipChain, depth int) *chainResult {
	if c.done {
		w.warnings = append(w.warnings, c.res.warns...)
		if w.track {
			w.deps = append(w.deps, c.res.chains...)
		}
		if depth+c.res.height >= maxChainDepth {
			w.odd = true
		}
		return &c.res
	}
	if c.busy || depth > maxChainDepth {
		w.odd = true
		w.warnf("nat chain %s: jump loop or nesting deeper than %d chains", c.name, maxChainDepth)
		return &chainResult{}
	}
	c.busy = true
	warns0, deps0 := len(w.warnings), len(w.deps)
	w.dep(c.name)
	res := &c.res
	ext := strings.HasPrefix(c.name, chainPrefixEXT) || strings.HasPrefix(c.name, chainPrefixXLB)
	for _, r := range c.rules {
		if ext && r.sourceConditional() {
			continue
		}
		if r.target() == "KUBE-MARK-DROP" && len(res.backends) == 0 && !res.drop && r.unconditional() {
			res.drop = true
			res.evidence = append(res.evidence, w.ev("nat", r))
			break
		}
		w.resolveRule(r, res, depth)
	}
	if len(w.warnings) > warns0 {
		res.warns = append([]string(nil), w.warnings[warns0:]...)
	}
	if w.track {
		res.chains = dedupe(append([]string(nil), w.deps[deps0:]...))
	}
	if depth+res.height >= maxChainDepth {
		w.odd = true
	}
	c.busy, c.done = false, true
	return res
}

// proto is a rule's protocol or "" when it names none.
func proto(r *ipRule) model.Protocol {
	p, _ := model.ParseProtocol(r.proto())
	return p
}

// resolveRule adds what one rule of a service chain contributes. Evidence
// keeps the DNAT rules and the jumps between service chains; a jump to a
// KUBE-SEP chain is left out (its DNAT rule names the chain).
func (w *walker) resolveRule(r *ipRule, res *chainResult, depth int) {
	if res.svc == nil && r.comment() != "" {
		if sp, ok := commentService(r.comment(), proto(r)); ok && !sp.IsZero() {
			res.svc = &sp
		}
	}
	switch r.tkind {
	case targetDNAT:
		ap, err := parseToDestination(r.toDest())
		if err != nil {
			w.warnf("nat %s: DNAT target %q not understood: %s", r.chain, r.toDest(), r.text)
			return
		}
		res.backends = append(res.backends, ap)
		res.evidence = append(res.evidence, w.ev("nat", r))
	case targetSEP, targetChain:
		target := w.nat.chain(r.target())
		if target == nil {
			w.dep(r.target())
			if r.target() == "REJECT" || r.target() == "DROP" {
				w.warnf("nat %s: %s in the nat table ignored: %s", r.chain, r.target(), r.text)
			}
			return
		}
		sub := w.resolve(target, depth+1)
		res.height = max(res.height, sub.height+1)
		if r.tkind != targetSEP {
			res.evidence = append(res.evidence, w.ev("nat", r))
		}
		res.evidence = append(res.evidence, sub.evidence...)
		res.backends = append(res.backends, sub.backends...)
		if sub.drop && len(res.backends) == 0 {
			res.drop = true
		}
		if res.svc == nil {
			res.svc = sub.svc
		}
	}
}

// parseToDestination reads a DNAT target "ip:port" or "[ipv6]:port".
func parseToDestination(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}
