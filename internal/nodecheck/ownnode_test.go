package nodecheck

import (
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

// ownOnly keeps only in's own Node, as an agent run with --watch-nodes=own
// sees the cluster.
func ownOnly(in Inputs) Inputs {
	var own []model.NodeInfo
	for _, n := range in.Nodes {
		if n.Name == in.NodeName {
			own = append(own, n)
		}
	}
	in.Nodes, in.OwnNodeOnly = own, true
	return in
}

// TestOnlyOwnNodeSkipsOtherNodeRules: knowing only its own Node, a node
// cannot tell a route to another node's podCIDR, or an endpoint on another
// node, from one to a deleted node; those rules are skipped and say why,
// while the same inputs without the mark find (falsely) every other node
// gone. Rules about the node itself still run.
func TestOnlyOwnNodeSkipsOtherNodeRules(t *testing.T) {
	in, cfg := hostGW()
	in.Endpoints = []model.EndpointInfo{ep("shop/cart", "cart-abc", "10.244.2.8", "c", true)}
	own := ownOnly(in)
	fs, info := Check(own, cfg, now)
	wantFindings(t, fs)
	for _, rule := range []string{"stale_route, missing_route: ", "endpoint_on_missing_node: "} {
		if !skipped(info, rule+ownNodeOnly) {
			t.Errorf("skipped %q, want %q", info.Skipped, rule+ownNodeOnly)
		}
	}
	if info.LinksChecked == 0 {
		t.Error("link rules did not run")
	}

	own.OwnNodeOnly = false // the same Nodes taken as the whole cluster
	fs, _ = Check(own, cfg, now)
	var kinds []string
	for _, f := range fs {
		kinds = append(kinds, string(f.Kind))
	}
	if !strings.Contains(strings.Join(kinds, " "), "stale_route") || !strings.Contains(strings.Join(kinds, " "), "endpoint_on_missing_node") {
		t.Errorf("without the mark: findings %q, want stale_route and endpoint_on_missing_node", kinds)
	}
}

func skipped(info Info, want string) bool {
	for _, s := range info.Skipped {
		if s == want {
			return true
		}
	}
	return false
}
