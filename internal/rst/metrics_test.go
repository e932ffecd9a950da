package rst

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsCapAndLint(t *testing.T) {
	m := NewMetrics(2)
	tbl := Table{Addrs: map[netip.Addr]Target{}}
	counts := map[netip.Addr]Counts{}
	for i, svc := range []string{"a", "b", "c", "d"} {
		ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})
		tbl.Addrs[ip] = Target{Namespace: "ns", Service: svc}
		counts[ip] = Counts{SentBy: uint64(i + 1)}
	}
	m.Observe(counts, tbl)
	m.SetStatus(Status{Up: true, Mode: ModeTracepoint})
	m.SetStats(Stats{EventsRateLimited: 7})
	want := `
# HELP netdrift_rst_probe_events_dropped_total RST events not delivered (counters still count them), by cause.
# TYPE netdrift_rst_probe_events_dropped_total counter
netdrift_rst_probe_events_dropped_total{cause="rate_limited"} 7
netdrift_rst_probe_events_dropped_total{cause="ring_full"} 0
# HELP netdrift_rst_probe_up 1 when the eBPF RST probe is attached; mode says how (tracepoint, fentry), none when it is not.
# TYPE netdrift_rst_probe_up gauge
netdrift_rst_probe_up{mode="tracepoint"} 1
# HELP netdrift_terminating_rsts_total TCP resets sent by or to watched (terminating or recently deleted) pod IPs and Service VIPs, by service. Series beyond the cap are summed under namespace="_other",service="_other".
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
	counts[netip.MustParseAddr("10.0.0.1")] = Counts{SentBy: 11}
	m.Observe(counts, tbl)
	counts[netip.MustParseAddr("10.0.0.5")] = Counts{SentBy: 5}
	tbl.Addrs[netip.MustParseAddr("10.0.0.5")] = Target{Namespace: "ns", Service: "e"}
	m.Observe(counts, tbl)
	want2 := `
# HELP netdrift_terminating_rsts_total TCP resets sent by or to watched (terminating or recently deleted) pod IPs and Service VIPs, by service. Series beyond the cap are summed under namespace="_other",service="_other".
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
	m := NewMetrics(0)
	m.SetStatus(Status{Mode: ModeNone, Reason: "no BTF"})
	want := `
# HELP netdrift_rst_probe_up 1 when the eBPF RST probe is attached; mode says how (tracepoint, fentry), none when it is not.
# TYPE netdrift_rst_probe_up gauge
netdrift_rst_probe_up{mode="none"} 0
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "netdrift_rst_probe_up"); err != nil {
		t.Error(err)
	}
}
