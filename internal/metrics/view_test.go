package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/agent/agenttest"
	"github.com/netdrift/netdrift/internal/metrics"
)

// TestViewMetricsOfABlindAgent: a blind agent exports view_current 0, its
// reason 1 and the others 0, and how long it has been blind.
func TestViewMetricsOfABlindAgent(t *testing.T) {
	c := metrics.NewCollector(agenttest.Blind, "v", 10)
	want := `
# HELP netdrift_view_blind_seconds Seconds since the view stopped being current (0 while current).
# TYPE netdrift_view_blind_seconds gauge
netdrift_view_blind_seconds 65
# HELP netdrift_view_current 1 while the agent's view is current (caches synced, watch healthy, API requests answered, last datapath read good); while 0 its answers say they rest on no current view.
# TYPE netdrift_view_current gauge
netdrift_view_current 0
# HELP netdrift_view_not_current_reason 1 for the reason the view is not current, 0 for the others (every reason exported).
# TYPE netdrift_view_not_current_reason gauge
netdrift_view_not_current_reason{reason="api_failing"} 1
netdrift_view_not_current_reason{reason="caches_not_synced"} 0
netdrift_view_not_current_reason{reason="datapath_behind"} 0
netdrift_view_not_current_reason{reason="datapath_read_failed"} 0
netdrift_view_not_current_reason{reason="no_datapath"} 0
netdrift_view_not_current_reason{reason="starting"} 0
netdrift_view_not_current_reason{reason="watch_unhealthy"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "netdrift_view_current", "netdrift_view_not_current_reason",
		"netdrift_view_blind_seconds"); err != nil {
		t.Fatal(err)
	}
}

// TestFallbackMetricStaysAtZeroOnceOver: an active fallback is 1; once it
// is over its series stays at 0 rather than vanishing.
func TestFallbackMetricStaysAtZeroOnceOver(t *testing.T) {
	s := agenttest.State()
	s.Fallbacks = append(s.Fallbacks, agent.Fallback{Reader: "iptables", From: "netlink", To: "iptables-save", Reason: "rule 3 does not decode"})
	c := metrics.NewCollector(func() agent.State { return s }, "v", 10)
	head := `
# HELP netdrift_reader_fallback_active 1 while a reader reads by a fallback path (to) instead of its preferred one; 0 once over.
# TYPE netdrift_reader_fallback_active gauge
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(head+`netdrift_reader_fallback_active{reader="iptables",to="iptables-save"} 1
netdrift_reader_fallback_active{reader="nftables-events",to="read time"} 1
`), "netdrift_reader_fallback_active"); err != nil {
		t.Fatal(err)
	}
	s.Fallbacks = nil
	if err := testutil.CollectAndCompare(c, strings.NewReader(head+`netdrift_reader_fallback_active{reader="iptables",to="iptables-save"} 0
netdrift_reader_fallback_active{reader="nftables-events",to="read time"} 0
`), "netdrift_reader_fallback_active"); err != nil {
		t.Fatal(err)
	}
}
