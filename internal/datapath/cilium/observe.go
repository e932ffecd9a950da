package cilium

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/netdrift/netdrift/internal/model"
)

// feKey identifies one frontend's entries in a services map.
type feKey struct {
	addr  netip.Addr
	port  uint16
	proto uint8
	scope uint8
}

// frontendSlots is one frontend's master entry and its backend slots.
type frontendSlots struct {
	master svcEntry
	found  bool
	slots  map[uint16]uint32 // slot -> backend id
}

// observe turns the services and backends maps into the observed model.
// Rules (docs/architecture.md, "Cilium mode"):
//   - slots 1..count are the backends a new connection may be sent to; slots
//     count+1..count+qcount are parked (terminating, quarantined): visible,
//     never chosen. They are reported as evidence, not as backends.
//   - a frontend with no selectable slot rejects (Cilium's default
//     "no backend" response).
//   - wildcard entries (port 0: Cilium drops a VIP's other ports) are
//     Cilium's own and are not compared.
//   - node-port entries (one per node address plus the any-address one)
//     collapse into the model's one node port per family and protocol.
//   - the internal-scope twin of a two-scope frontend (traffic policy Local)
//     is reported as evidence; the external scope is what is compared.
//   - host ports, local-redirect and L7 load-balancer frontends are not
//     Services as kube-proxy programs them: not compared, counted in a warning.
func observe(svcs []svcEntry, backends map[uint32]backendEntry, hints model.Hints) model.Observed {
	obs := model.Observed{Datapath: model.ModeCilium, Frontends: map[model.Frontend]model.Verdict{}}
	groups := groupFrontends(svcs)
	keys := slices.SortedFunc(maps.Keys(groups), keyCompare)
	skipped := map[string]int{}
	for _, k := range keys {
		g := groups[k]
		if k.port == 0 { // Cilium's own wildcard entry (drops other ports of a VIP)
			continue
		}
		if why := skipReason(g); why != "" {
			skipped[why]++
			continue
		}
		fe, v, warn := verdictOf(k, g, backends, hints)
		if warn != "" {
			obs.Warnings = append(obs.Warnings, warn)
		}
		if k.scope == scopeInternal {
			addScopeEvidence(obs.Frontends, fe, v)
			continue
		}
		if old, ok := obs.Frontends[fe]; ok {
			if note := mergeNote(fe, old, v); note != "" {
				obs.Warnings = append(obs.Warnings, note)
			}
			if !k.addr.IsUnspecified() { // the any-address node port entry wins
				continue
			}
		}
		obs.Frontends[fe] = v
	}
	for _, why := range slices.Sorted(maps.Keys(skipped)) {
		obs.Warnings = append(obs.Warnings, fmt.Sprintf("%d %s not compared", skipped[why], why))
	}
	return obs
}

func groupFrontends(svcs []svcEntry) map[feKey]*frontendSlots {
	groups := map[feKey]*frontendSlots{}
	for _, e := range svcs {
		k := feKey{e.Addr, e.Port, e.Proto, e.Scope}
		g := groups[k]
		if g == nil {
			g = &frontendSlots{slots: map[uint16]uint32{}}
			groups[k] = g
		}
		if e.Slot == 0 {
			g.master, g.found = e, true
			continue
		}
		g.slots[e.Slot] = e.BackendID
	}
	return groups
}

// skipReason says why a frontend is not compared, or "".
func skipReason(g *frontendSlots) string {
	switch {
	case !g.found:
		return "backend slots without a master entry (a write in progress?)"
	case g.master.Flags&flagHostPort != 0:
		return "host-port entries"
	case g.master.Flags2&flag2LocalRedirect != 0:
		return "local-redirect entries"
	case g.master.Flags2&flag2L7LoadBalancer != 0:
		return "L7 load-balancer entries"
	}
	return ""
}

// verdictOf builds one frontend's verdict from its slots.
func verdictOf(k feKey, g *frontendSlots, backends map[uint32]backendEntry, hints model.Hints) (model.Frontend, model.Verdict, string) {
	proto, warn := protocolOf(k.proto)
	fe := frontendOf(k, g.master.Flags, proto)
	v := model.Verdict{Service: hints.Frontends[fe], Action: model.Forward}
	m := g.master
	var missing []uint16
	for slot := uint16(1); slot <= m.Count+m.QCount; slot++ {
		id, ok := g.slots[slot]
		b, bok := backends[id]
		if !ok || !bok {
			missing = append(missing, slot)
			continue
		}
		ap := netip.AddrPortFrom(b.Addr, b.Port)
		if slot <= m.Count {
			v.Backends = append(v.Backends, ap)
			if b.State != stateActive {
				v.Evidence = append(v.Evidence, fmt.Sprintf("slot %d: %s %s (selectable: no active backend)", slot, ap, stateName(b.State)))
			}
			continue
		}
		v.Evidence = append(v.Evidence, fmt.Sprintf("slot %d: %s %s, parked (never chosen)", slot, ap, stateName(b.State)))
	}
	v.Backends = model.SortBackends(v.Backends)
	if len(v.Backends) == 0 {
		v.Action = model.Reject
	}
	v.Evidence = append([]string{masterEvidence(k, m)}, v.Evidence...)
	if len(missing) > 0 {
		warn = joinWarn(warn, fmt.Sprintf("%s: slots %v name no backend in %s/%s", fe, missing, backends4Name, backends6Name))
	}
	return fe, v, warn
}

// frontendOf maps a services key and its master flags to the model's frontend.
func frontendOf(k feKey, flags uint8, proto model.Protocol) model.Frontend {
	switch {
	case flags&flagNodePort != 0:
		return model.NewNodePort(k.port, proto, model.FamilyOf(k.addr))
	case flags&flagExternalIP != 0:
		return model.NewFrontend(k.addr, k.port, proto, model.ExternalIP)
	case flags&flagLoadBalancer != 0:
		return model.NewFrontend(k.addr, k.port, proto, model.LoadBalancer)
	}
	return model.NewFrontend(k.addr, k.port, proto, model.ClusterIP)
}

// protocolOf maps an IP protocol number. 0 (any) is what Cilium writes
// without protocol differentiation (bpf-lb-proto-diff off).
func protocolOf(p uint8) (model.Protocol, string) {
	switch p {
	case 6:
		return model.TCP, ""
	case 17:
		return model.UDP, ""
	case 132:
		return model.SCTP, ""
	case 0:
		return model.TCP, "frontend with protocol ANY (Cilium without bpf-lb-proto-diff): compared as TCP"
	}
	return model.TCP, fmt.Sprintf("frontend with IP protocol %d: compared as TCP", p)
}

func masterEvidence(k feKey, m svcEntry) string {
	scope := "external"
	if k.scope == scopeInternal {
		scope = "internal"
	}
	return fmt.Sprintf("%s %s:%d/%d scope %s: count %d qcount %d rev-nat %d flags 0x%02x/0x%02x",
		services4Or6(k.addr), k.addr, k.port, k.proto, scope, m.Count, m.QCount, m.RevNat, m.Flags, m.Flags2)
}

func services4Or6(a netip.Addr) string {
	if a.Is4() {
		return services4Name
	}
	return services6Name
}

// addScopeEvidence notes the internal-scope twin on the external frontend.
func addScopeEvidence(fes map[model.Frontend]model.Verdict, fe model.Frontend, in model.Verdict) {
	ext, ok := fes[fe]
	if !ok {
		return
	}
	ev := make([]string, 0, len(ext.Evidence)+1)
	ev = append(ev, ext.Evidence...)
	ext.Evidence = append(ev, fmt.Sprintf("internal scope (traffic policy Local): %d backends %v", len(in.Backends), in.Backends))
	fes[fe] = ext
}

func mergeNote(fe model.Frontend, a, b model.Verdict) string {
	if slices.Equal(a.Backends, b.Backends) {
		return ""
	}
	return fmt.Sprintf("%s: node-address entries differ (%v vs %v); the any-address entry is compared", fe, a.Backends, b.Backends)
}

func joinWarn(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func keyCompare(a, b feKey) int {
	return cmp.Or(a.addr.Compare(b.addr), cmp.Compare(a.port, b.port), cmp.Compare(a.proto, b.proto), cmp.Compare(a.scope, b.scope))
}
