package rst

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netdrift/netdrift/internal/model"
)

// fixedSnapshot is a Snapshotter serving a snapshot the test changes.
type fixedSnapshot struct{ s Snapshot }

func (f *fixedSnapshot) Snapshot() Snapshot { return f.s }

func TestMetricsCapAndLint(t *testing.T) {
	src := &fixedSnapshot{Snapshot{Status: Status{Up: true, Mode: ModeTracepoint}, Totals: map[model.ServiceName]uint64{},
		Sampling: Sampling{RateLimited: 7}}}
	m := NewMetrics(src, 2)
	for i, svc := range []string{"a", "b", "c", "d"} {
		src.s.Totals[model.ServiceName{Namespace: "ns", Name: svc}] = uint64(i + 1)
	}
	want := `
# HELP netdrift_rst_probe_events_dropped_total RST events not delivered (counters still count them), by cause.
# TYPE netdrift_rst_probe_events_dropped_total counter
netdrift_rst_probe_events_dropped_total{cause="rate_limited"} 7
netdrift_rst_probe_events_dropped_total{cause="ring_full"} 0
# HELP netdrift_rst_probe_up 1 when the eBPF RST probe is attached; mode says how (tracepoint, fentry), none when it is not.
# TYPE netdrift_rst_probe_up gauge
netdrift_rst_probe_up{mode="tracepoint"} 1
# HELP netdrift_rst_unsettled Resets counted before any known deletion request of their pod, not yet settled as ready or terminating.
# TYPE netdrift_rst_unsettled gauge
netdrift_rst_unsettled 0
# HELP netdrift_terminating_rsts_total TCP resets sent by or to this node's pods at or after their deletion request (terminating or recently deleted), by service; the terminating and deleted states of netdrift_endpoint_rsts_total. Series beyond the cap are summed under namespace="_other",service="_other".
# TYPE netdrift_terminating_rsts_total counter
netdrift_terminating_rsts_total{namespace="_other",service="_other"} 7
netdrift_terminating_rsts_total{namespace="ns",service="a"} 1
netdrift_terminating_rsts_total{namespace="ns",service="b"} 2
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(m)
	if err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
	// A later service still goes to _other; admitted ones keep their series.
	src.s.Totals[model.ServiceName{Namespace: "ns", Name: "a"}] = 11
	src.s.Totals[model.ServiceName{Namespace: "ns", Name: "e"}] = 5
	want2 := `
# HELP netdrift_terminating_rsts_total TCP resets sent by or to this node's pods at or after their deletion request (terminating or recently deleted), by service; the terminating and deleted states of netdrift_endpoint_rsts_total. Series beyond the cap are summed under namespace="_other",service="_other".
# TYPE netdrift_terminating_rsts_total counter
netdrift_terminating_rsts_total{namespace="_other",service="_other"} 12
netdrift_terminating_rsts_total{namespace="ns",service="a"} 11
netdrift_terminating_rsts_total{namespace="ns",service="b"} 2
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want2), "netdrift_terminating_rsts_total"); err != nil {
		t.Error(err)
	}
}

func TestMetricsProbeDown(t *testing.T) {
	m := NewMetrics(&fixedSnapshot{Snapshot{Status: Status{Mode: ModeNone, Reason: "no BTF"}}}, 0)
	want := `
# HELP netdrift_rst_probe_up 1 when the eBPF RST probe is attached; mode says how (tracepoint, fentry), none when it is not.
# TYPE netdrift_rst_probe_up gauge
netdrift_rst_probe_up{mode="none"} 0
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "netdrift_rst_probe_up"); err != nil {
		t.Error(err)
	}
}

// TestMetricsStates: the per-state series and the Ready refusals are the
// snapshot's, zero states omitted.
func TestMetricsStates(t *testing.T) {
	src := &fixedSnapshot{Snapshot{Status: Status{Up: true, Mode: ModeTracepoint}, Unsettled: 3,
		ByState: map[model.ServiceName]StateCounts{{Namespace: "shop", Name: "web"}: {Ready: 9, Terminating: 4, Deleted: 1, ReadyRefusals: 8}}}}
	want := `
# HELP netdrift_endpoint_rsts_total TCP resets sent by or to this node's pods, by service and the endpoint's state when the reset was sent (ready, not_ready, terminating, deleted). Resets sent before any known deletion request appear once settled (netdrift_rst_unsettled).
# TYPE netdrift_endpoint_rsts_total counter
netdrift_endpoint_rsts_total{namespace="shop",service="web",state="deleted"} 1
netdrift_endpoint_rsts_total{namespace="shop",service="web",state="ready"} 9
netdrift_endpoint_rsts_total{namespace="shop",service="web",state="terminating"} 4
# HELP netdrift_ready_endpoint_refusals_total TCP resets a Ready endpoint of this node sent from its Service's target port to a connection attempt with no listener (clients refused while Ready: the readiness probe does not cover the listener), by service.
# TYPE netdrift_ready_endpoint_refusals_total counter
netdrift_ready_endpoint_refusals_total{namespace="shop",service="web"} 8
# HELP netdrift_rst_unsettled Resets counted before any known deletion request of their pod, not yet settled as ready or terminating.
# TYPE netdrift_rst_unsettled gauge
netdrift_rst_unsettled 3
`
	if err := testutil.CollectAndCompare(NewMetrics(src, 10), strings.NewReader(want), "netdrift_endpoint_rsts_total",
		"netdrift_ready_endpoint_refusals_total", "netdrift_rst_unsettled"); err != nil {
		t.Error(err)
	}
}
