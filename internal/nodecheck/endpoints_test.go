package nodecheck

import (
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

func ep(svc, slice, ip, nodeName string, ready bool) model.EndpointInfo {
	ns, name, _ := strings.Cut(svc, "/")
	return model.EndpointInfo{Service: model.ServicePort{ServiceName: model.ServiceName{Namespace: ns, Name: name}}, Slice: slice, Addr: addr(ip),
		NodeName: nodeName, Ready: ready, Serving: ready}
}

func TestEndpointOnMissingNode(t *testing.T) {
	nodes := threeNodes("10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24")
	nodes[1].Ready, nodes[1].ReadySince = false, now.Add(-6*time.Minute) // b: NotReady 6m: gone
	nodes[2].Ready, nodes[2].ReadySince = false, now.Add(-4*time.Minute) // c: NotReady 4m: not yet
	eps := []model.EndpointInfo{
		ep("shop/cart", "cart-abc", "10.244.0.5", "a", true),
		ep("shop/cart", "cart-abc", "10.244.1.7", "b", false),
		ep("shop/cart", "cart-abc", "10.244.2.8", "c", true),
		ep("shop/cart", "cart-abc", "10.244.9.3", "d", true),
		ep("shop/cart", "cart-def", "10.244.9.4", "d", false),
		ep("shop/cart", "cart-def", "10.244.9.3", "d", true), // same address in two slices
		ep("shop/web", "web-abc", "10.244.9.5", "d", true),
		ep("shop/ext", "ext-abc", "203.0.113.5", "", true), // no nodeName: not judged
	}
	in := Inputs{NodeName: "a", Nodes: nodes, Endpoints: eps}
	fs, _ := Check(in, Config{}, now)
	wantFindings(t, fs,
		"endpoint_on_missing_node node b",
		"endpoint_on_missing_node node d",
		"endpoint_on_missing_node node d",
	)
	for _, f := range fs {
		if f.Scope != model.ScopeCluster {
			t.Errorf("%s: scope %q", f.Subject, f.Scope)
		}
	}
	if fs[0].Service.Name != "cart" || !strings.Contains(fs[0].Detail, "has been NotReady for 6m0s") ||
		strings.Contains(fs[0].Detail, "still ready") {
		t.Errorf("b: %+v", fs[0])
	}
	cart := fs[1]
	for _, want := range []string{"2 endpoints of shop/cart (10.244.9.3, 10.244.9.4)", "does not exist", "1 still ready or serving"} {
		if !strings.Contains(cart.Detail, want) {
			t.Errorf("detail %q lacks %q", cart.Detail, want)
		}
	}
	if len(cart.Evidence) != 3 {
		t.Errorf("evidence %q", cart.Evidence)
	}
	if fs[2].Service.Name != "web" || !strings.HasPrefix(fs[2].Detail, "1 endpoint of shop/web") {
		t.Errorf("web: %s", fs[2].Detail)
	}

	// a longer grace period keeps b
	fs, _ = Check(in, Config{NodeGoneAfter: 10 * time.Minute}, now)
	wantFindings(t, fs, "endpoint_on_missing_node node d", "endpoint_on_missing_node node d")
}

func TestEndpointRuleNeedsNodes(t *testing.T) {
	fs, info := Check(Inputs{Endpoints: []model.EndpointInfo{ep("shop/cart", "s", "10.0.0.1", "x", true)}}, Config{}, now)
	wantFindings(t, fs)
	if len(info.Skipped) != 1 || !strings.Contains(info.Skipped[0], "no Node objects") {
		t.Errorf("skipped %q", info.Skipped)
	}
}

func TestNodeWithoutReadyConditionIsNotGone(t *testing.T) {
	nodes := []model.NodeInfo{{Name: "new"}}
	fs, _ := Check(Inputs{Nodes: nodes, Endpoints: []model.EndpointInfo{ep("shop/cart", "s", "10.0.0.1", "new", true)}}, Config{}, now)
	wantFindings(t, fs)
}
