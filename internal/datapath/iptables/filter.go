package iptables

import (
	"net/netip"

	"github.com/netdrift/netdrift/internal/model"
)

// filterRule handles one filter-table rule of KUBE-SERVICES,
// KUBE-EXTERNAL-SERVICES or KUBE-NODEPORTS: REJECT ("has no endpoints") or
// DROP ("has no local endpoints").
func (w *walker) filterRule(r *ipRule) {
	var action model.Action
	switch r.target() {
	case "REJECT":
		action = model.Reject
	case "DROP":
		action = model.Drop
	default:
		return // health-check ACCEPT rules, jumps, bookkeeping
	}
	f, ok := w.filterFrontend(r)
	if !ok {
		w.warnf("filter %s rule not understood: %s", r.chain, r.text)
		return
	}
	e := w.entryFor(f)
	e.evidence = append(e.evidence, w.ev("filter", r))
	if e.filterAction == "" {
		e.filterAction = action
	}
	if e.svc.IsZero() {
		if sp, ok := commentService(r.comment(), f.Protocol); ok {
			e.svc = sp
		} else if sp, ok := w.idx.frontends[f]; ok {
			e.svc = sp
		}
	}
}

// filterFrontend tells which frontend a filter rule is about.
func (w *walker) filterFrontend(r *ipRule) (model.Frontend, bool) {
	k, nodePort, ok := filterKey(r)
	switch {
	case !ok:
		return model.Frontend{}, false
	case nodePort:
		return model.NewNodePort(k.port, k.proto, w.fam), true
	case r.chain == chainServices:
		return model.NewFrontend(k.ip, k.port, k.proto, model.ClusterIP), true
	}
	return model.NewFrontend(k.ip, k.port, k.proto, w.externalKind(k)), true
}

// filterKey is the address (none for a node port), port and protocol a
// filter rule is about; it reads only the rule.
func filterKey(r *ipRule) (k frontKey, nodePort, ok bool) {
	if r.dst() == "" || r.has(flDstLocal) {
		if r.dst() != "" && !isLoopbackNet(r.dst()) {
			return frontKey{}, false, false
		}
		k, ok := ruleKey(r, false)
		if !ok || r.chain == chainServices && !r.has(flDstLocal) {
			return frontKey{}, false, false
		}
		return k, true, true
	}
	k, ok = ruleKey(r, true)
	return k, false, ok
}

// externalKind tells external_ip from load_balancer for a filter rule: from
// a nat rule for the same address, else the caller's known frontends.
func (w *walker) externalKind(k frontKey) model.FrontendKind {
	for _, kind := range []model.FrontendKind{model.LoadBalancer, model.ExternalIP} {
		if _, ok := w.entries[model.NewFrontend(k.ip, k.port, k.proto, kind)]; ok {
			return kind
		}
	}
	if kind, ok := w.idx.kinds[k]; ok {
		return kind
	}
	w.warnf("cannot tell external IP from load-balancer IP for %s (filter rule, unknown frontend); assuming external_ip", netip.AddrPortFrom(k.ip, k.port))
	return model.ExternalIP
}

// firewallRule attaches a KUBE-PROXY-FIREWALL drop rule to its
// load-balancer frontend as evidence: it drops sources the KUBE-FW chain did
// not accept, and does not change the backend set.
func (w *walker) firewallRule(r *ipRule) {
	k, ok := w.ruleKey(r, true)
	if !ok || r.target() != "DROP" {
		return
	}
	f := model.NewFrontend(k.ip, k.port, k.proto, model.LoadBalancer)
	e, ok := w.entries[f]
	if !ok {
		w.warnf("filter %s drops traffic to %s, which no nat rule captures: %s", r.chain, f, r.text)
		return
	}
	e.evidence = append(e.evidence, w.ev("filter", r))
}

// verdicts turns the entries into observed verdicts.
func (w *walker) verdicts() map[model.Frontend]model.Verdict {
	out := make(map[model.Frontend]model.Verdict, len(w.entries))
	for _, f := range w.order {
		out[f] = w.verdict(f, w.entries[f])
	}
	w.warnings = dedupe(w.warnings)
	return out
}

// verdict turns one entry into its observed verdict.
func (w *walker) verdict(f model.Frontend, e *entry) model.Verdict {
	v := model.Verdict{Service: e.svc, Evidence: dedupe(e.evidence)}
	switch {
	case e.natSeen && len(e.backends) > 0:
		v.Action = model.Forward
		v.Backends = model.SortBackends(append([]netip.AddrPort(nil), e.backends...))
		if e.filterAction != "" {
			w.warnf("%s %s is DNATed and also has a filter %s rule (the filter rule never sees it)", f.Kind, f, e.filterAction)
		}
	case e.filterAction != "":
		v.Action = e.filterAction
	case e.natSeen && e.drop:
		v.Action = model.Drop
	default:
		v.Action = model.Forward
		w.warnf("%s %s is captured but its chains DNAT to no endpoint", f.Kind, f)
	}
	if v.Service.IsZero() {
		why := "service port unknown: no comment"
		if e.chain != "" {
			why += ", chain " + e.chain + " matches no known service port"
		}
		v.Evidence = append(v.Evidence, why)
		w.warnf("%s %s: %s", f.Kind, f, why)
	}
	return v
}
