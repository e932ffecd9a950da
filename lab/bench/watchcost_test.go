package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/scenarios"
)

const apiMetrics = `# HELP apiserver_longrunning_requests Gauge of all active long-running apiserver requests
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="discovery.k8s.io",resource="endpointslices",scope="cluster",subresource="",verb="WATCH",version="v1"} 21
apiserver_longrunning_requests{component="apiserver",group="",resource="services",scope="cluster",subresource="",verb="WATCH",version="v1"} 20
apiserver_longrunning_requests{component="apiserver",group="",resource="services",scope="namespace",subresource="",verb="WATCH",version="v1"} 1
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="exec",verb="CONNECT",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1"} 7
apiserver_request_total{code="500",component="apiserver",dry_run="",group="",resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="cluster",subresource="",verb="GET",version="v1"} 99
apiserver_watch_events_total{group="discovery.k8s.io",resource="endpointslices",version="v1"} 1000
apiserver_watch_events_sizes_sum{group="discovery.k8s.io",resource="endpointslices",version="v1"} 2.5e+06
apiserver_watch_events_sizes_count{group="discovery.k8s.io",resource="endpointslices",version="v1"} 1000
go_memstats_heap_inuse_bytes 1.5e+08
go_goroutines 1234
`

func TestAPICountersFrom(t *testing.T) {
	s, err := scenarios.ParseMetrics(apiMetrics)
	if err != nil {
		t.Fatal(err)
	}
	c := APICountersFrom(s)
	if c.Watches["endpointslices"] != 21 || c.Watches["services"] != 21 || len(c.Watches) != 2 {
		t.Errorf("watches %v: want endpointslices 21, services 21 (both scopes), no CONNECT", c.Watches)
	}
	if c.Lists["nodes"] != 8 || len(c.Lists) != 1 {
		t.Errorf("lists %v: want nodes 8 (every code, LIST only)", c.Lists)
	}
	if c.Requests["LIST"] != 8 || c.Requests["GET"] != 99 || len(c.Requests) != 2 {
		t.Errorf("requests %v: want LIST 8, GET 99", c.Requests)
	}
	if c.Events["endpointslices"] != 1000 || c.EventBytes["endpointslices"] != 2.5e6 {
		t.Errorf("events %v bytes %v", c.Events, c.EventBytes)
	}
	if c.HeapInuse != 1.5e8 || c.Goroutines != 1234 {
		t.Errorf("heap %g goroutines %g", c.HeapInuse, c.Goroutines)
	}
}

func TestAPICountersSub(t *testing.T) {
	a := APICounters{Watches: map[string]float64{"services": 40, "pods": 5}, Events: map[string]float64{"services": 10},
		HeapInuse: 100, Goroutines: 50}
	b := APICounters{Watches: map[string]float64{"services": 20, "leases": 3}, Events: map[string]float64{"services": 10},
		HeapInuse: 150, Goroutines: 30}
	d := a.Sub(b)
	want := map[string]float64{"services": 20, "pods": 5, "leases": -3}
	if len(d.Watches) != len(want) {
		t.Fatalf("watches %v, want %v", d.Watches, want)
	}
	for k, v := range want {
		if d.Watches[k] != v {
			t.Errorf("watches[%s] = %g, want %g", k, d.Watches[k], v)
		}
	}
	if len(d.Events) != 0 {
		t.Errorf("events %v: an unchanged counter is left out", d.Events)
	}
	if d.HeapInuse != -50 || d.Goroutines != 20 {
		t.Errorf("heap %g goroutines %g", d.HeapInuse, d.Goroutines)
	}
}

func TestRSSOf(t *testing.T) {
	st := RSSOf([]int64{100, 300, 200})
	if st.Mean != 200 || st.Max != 300 || st.Samples != 3 {
		t.Errorf("%+v", st)
	}
	if st := RSSOf(nil); st != (RSSStats{}) {
		t.Errorf("no samples: %+v", st)
	}
}

// costWindow is a 10 s window of kind with 50 changes, the API server
// using api of CPU, watches open and events sent over it.
func costWindow(kind int, api time.Duration, watches, events float64) CostWindow {
	return CostWindow{Kind: kind, Took: 10 * time.Second, Changes: 50, API: api, Etcd: time.Second,
		APIRSS: RSSStats{Mean: int64(kind+1) << 20, Samples: 10},
		Before: APICounters{Events: map[string]float64{"endpointslices": 0}},
		After: APICounters{Watches: map[string]float64{"endpointslices": watches},
			Events: map[string]float64{"endpointslices": events}}}
}

func TestSummarizeAndDerive(t *testing.T) {
	ws := []CostWindow{
		costWindow(KindNone, 1*time.Second, 1, 50),
		costWindow(KindProxies, 2*time.Second, 21, 550),
		costWindow(KindAgents, 2500*time.Millisecond, 41, 1050),
		costWindow(KindProxies, 2200*time.Millisecond, 21, 550),
	}
	k := SummarizeCost(ws)
	p := k[KindProxies]
	if p.Runs != 2 || !near(p.APICores, 0.21) || !near(p.Spread, 0.02) {
		t.Errorf("kube-proxies: runs %d cores %g spread %g, want 2, 0.21, 0.02", p.Runs, p.APICores, p.Spread)
	}
	if want := 42 * time.Millisecond; absDur(p.PerChange-want) > time.Microsecond {
		t.Errorf("per change %s, want %s", p.PerChange, want)
	}
	if !near(p.Watches["endpointslices"], 21) || !near(p.EventsPerSec["endpointslices"], 55) || !near(p.EtcdCores, 0.1) {
		t.Errorf("kube-proxies: watches %v events/s %v etcd %g", p.Watches, p.EventsPerSec, p.EtcdCores)
	}
	d, err := Derive(k)
	if err != nil {
		t.Fatal(err)
	}
	if !near(d.Proxies.APICores, 0.11) || !near(d.Agents.APICores, 0.04) {
		t.Errorf("increments: kube-proxies %g, agents %g; want 0.11, 0.04", d.Proxies.APICores, d.Agents.APICores)
	}
	if !d.Comparable || !near(d.CPURatio, 0.04/0.11) || !near(d.Noise, 0.02) {
		t.Errorf("ratio %g (comparable %v) noise %g", d.CPURatio, d.Comparable, d.Noise)
	}
	if !near(d.Proxies.Watches["endpointslices"], 20) || !near(d.Agents.Watches["endpointslices"], 20) ||
		!near(d.Agents.EventsPerSec["endpointslices"], 50) {
		t.Errorf("watches %v / %v, agents' events %v", d.Proxies.Watches, d.Agents.Watches, d.Agents.EventsPerSec)
	}
	if d.Agents.APIRSS != 1<<20 {
		t.Errorf("agents' RSS increment %d, want 1 MiB", d.Agents.APIRSS)
	}
}

func TestDeriveNeedsEverySet(t *testing.T) {
	k := SummarizeCost([]CostWindow{costWindow(KindNone, time.Second, 1, 1), costWindow(KindAgents, time.Second, 1, 1)})
	if _, err := Derive(k); err == nil || !strings.Contains(err.Error(), "1 kube-proxies") {
		t.Errorf("err %v: want the missing set named", err)
	}
	// kube-proxies costing nothing over the baseline: no ratio.
	k = SummarizeCost([]CostWindow{costWindow(KindNone, time.Second, 1, 1), costWindow(KindProxies, time.Second, 1, 1),
		costWindow(KindAgents, 2*time.Second, 1, 1)})
	d, err := Derive(k)
	if err != nil || d.Comparable || d.CPURatio != 0 {
		t.Errorf("ratio %g comparable %v err %v: want no ratio", d.CPURatio, d.Comparable, err)
	}
}

func TestParseOrder(t *testing.T) {
	o, err := ParseOrder(strings.Fields("0 1 2 1 0"))
	if err != nil || len(o) != 5 || o[2] != KindAgents {
		t.Errorf("%v %v", o, err)
	}
	for _, bad := range []string{"0 1", "0 1 3 2", "a b c", ""} {
		if _, err := ParseOrder(strings.Fields(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestCostRatio(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		want string
	}{{1, 2, "0.50x"}, {1, 0, "n/a"}, {-1, 2, "n/a"}, {3, -1, "n/a"}} {
		if got := costRatio(c.a, c.b); got != c.want {
			t.Errorf("costRatio(%g, %g) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
}

func TestCostResultWrite(t *testing.T) {
	r := &CostResult{Config: CostConfig{Nodes: 20, Endpoints: 1000, EndpointsPerService: 10, Rate: 5,
		Window: 10 * time.Second, Order: []int{0, 1, 2, 1}, ProxyMode: "nftables"}, Services: 100,
		Windows: []CostWindow{costWindow(0, time.Second, 1, 50), costWindow(1, 2*time.Second, 21, 550),
			costWindow(2, 3*time.Second, 41, 1050), costWindow(1, 2*time.Second, 21, 550)}}
	var b bytes.Buffer
	r.Write(&b)
	for _, want := range []string{"| 20 kube-proxies (1−0) | 10.0 % |", "| 20 agents (2−1) | 10.0 % |",
		"| agents / kube-proxies | 1.00x |", "| endpointslices | 20 | 20 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestNodeHeartbeatPatch(t *testing.T) {
	at := time.Date(2026, 12, 5, 15, 4, 5, 999, time.FixedZone("x", 3600))
	var p struct {
		Status struct {
			Conditions []struct {
				Type              string `json:"type"`
				LastHeartbeatTime string `json:"lastHeartbeatTime"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(nodeHeartbeatPatch(at), &p); err != nil {
		t.Fatal(err)
	}
	c := p.Status.Conditions
	if len(c) != 1 || c[0].Type != "Ready" || c[0].LastHeartbeatTime != "2026-12-05T14:04:05Z" {
		t.Errorf("patch %s", nodeHeartbeatPatch(at))
	}
}

func TestByResource(t *testing.T) {
	m := map[string]float64{"services": 20, "endpointslices": 20042, "apiservices": 1, "leases": -12}
	if got := byResource(m, 10, num); got != "endpointslices 20042, leases -12, services 20" {
		t.Errorf("got %q", got)
	}
	if got := byResource(map[string]float64{"x": 0.2}, 0.5, num); got != "—" {
		t.Errorf("got %q", got)
	}
}

func TestRatioRange(t *testing.T) {
	lo, hi, ok := RatioRange(0.008, 0.014, 0.003)
	if !ok || !near(lo, 0.005/0.017) || !near(hi, 0.011/0.011) {
		t.Errorf("%g %g %v", lo, hi, ok)
	}
	if lo, _, ok := RatioRange(0.002, 0.002, 0.003); ok || lo != 0 {
		t.Errorf("b within the noise: lo %g bounded %v", lo, ok)
	}
}
