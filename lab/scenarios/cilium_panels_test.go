package scenarios

import (
	"strings"
	"testing"
)

// trafficFed are the metrics that only traffic through the datapath feeds:
// the cilium lab's nodes hold Cilium's maps but run no Cilium datapath, so
// no connection reaches a backend through them.
var trafficFed = []string{
	"netdrift_stale_backend_connections_total",
	"netdrift_terminating_rsts_total",
	"netdrift_ready_endpoint_refusals_total",
}

// testCiliumPanels: on kube-proxy-free nodes every dashboard query about
// netdrift returns series, as testPanels asks in the kube-proxy modes; the
// queries of kube-proxy's own metrics (no kube-proxy here) and of the
// traffic-fed metrics (no datapath carrying traffic in this lab) are named
// and left out.
func testCiliumPanels(t *testing.T, e *env) {
	checkPanels(t, e, func(expr string) string {
		if strings.Contains(expr, "kubeproxy_") || strings.Contains(expr, `job="kube-proxy"`) {
			return "kube-proxy's own metric: no kube-proxy on a kube-proxy-free node"
		}
		for _, m := range trafficFed {
			if strings.Contains(expr, m) {
				return "fed by traffic: the lab's Cilium nodes hold the maps but run no Cilium datapath"
			}
		}
		return ""
	})
}
