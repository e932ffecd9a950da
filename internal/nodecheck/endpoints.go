package nodecheck

import (
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

type epGroupKey struct {
	svc  model.ServicePort
	node string
}

// endpointRule produces endpoint_on_missing_node findings: one per service
// and missing node, cluster-scoped.
func endpointRule(w *world, eps []model.EndpointInfo, bySlice [][]model.EndpointInfo, info *Info) []model.Finding {
	if len(w.nodes) == 0 {
		info.Skipped = append(info.Skipped, "endpoint_on_missing_node: no Node objects known")
		return nil
	}
	if w.onlyOwnNode {
		info.Skipped = append(info.Skipped, "endpoint_on_missing_node: "+ownNodeOnly)
		return nil
	}
	groups := map[epGroupKey][]model.EndpointInfo{}
	for _, list := range append([][]model.EndpointInfo{eps}, bySlice...) {
		for _, e := range list {
			if e.NodeName == "" {
				continue
			}
			if gone, _ := w.nodeGone(e.NodeName); gone {
				k := epGroupKey{e.Service, e.NodeName}
				groups[k] = append(groups[k], e)
			}
		}
	}
	var out []model.Finding
	for k, es := range groups {
		_, why := w.nodeGone(k.node)
		out = append(out, endpointFinding(k, es, why))
	}
	return out
}

func endpointFinding(k epGroupKey, es []model.EndpointInfo, why string) model.Finding {
	sort.Slice(es, func(i, j int) bool {
		if c := es[i].Addr.Compare(es[j].Addr); c != 0 {
			return c < 0
		}
		return es[i].Slice < es[j].Slice
	})
	var addrs []string
	var ev []string
	ready := 0
	seen := map[netip.Addr]bool{}
	for _, e := range es {
		ev = append(ev, "slice "+e.Slice+": "+e.Addr.String()+" ready="+boolStr(e.Ready)+" serving="+boolStr(e.Serving))
		if seen[e.Addr] {
			continue
		}
		seen[e.Addr] = true
		addrs = append(addrs, e.Addr.String())
		if e.Ready || e.Serving {
			ready++
		}
	}
	noun, verb := "endpoint", "is"
	if len(addrs) > 1 {
		noun, verb = "endpoints", "are"
	}
	detail := strconv.Itoa(len(addrs)) + " " + noun + " of " + k.svc.Service() + " (" + strings.Join(addrs, ", ") +
		") " + verb + " on node " + k.node + ", which " + why
	if ready > 0 {
		them := "them"
		if ready == 1 {
			them = "it"
		}
		detail += "; " + strconv.Itoa(ready) + " still ready or serving, so clients are sent to " + them
	}
	return model.Finding{
		Kind:     model.EndpointOnMissingNode,
		Scope:    model.ScopeCluster,
		Service:  k.svc,
		Subject:  "node " + k.node,
		Detail:   detail + ".",
		Evidence: slices.Compact(ev),
	}
}
