package bench

import (
	"fmt"
	"sort"
	"time"

	"github.com/netdrift/netdrift/lab/scenarios"
)

// The three component sets of the watch-cost benchmark (`make
// bench-watchcost`): the API server's cost is measured under the same churn
// with nothing, N kube-proxies, and N kube-proxies plus N agents watching.
const (
	KindNone    = 0 // neither kube-proxies nor agents run
	KindProxies = 1 // N kube-proxies
	KindAgents  = 2 // N kube-proxies and N agents
)

// KindNames label the component sets in reports.
var KindNames = [3]string{"0 none", "1 kube-proxies", "2 kube-proxies + agents"}

// APICounters is what one scrape of the API server's /metrics says of its
// watches and lists, by resource (the "resource" label).
type APICounters struct {
	// Watches: WATCH requests open now (apiserver_longrunning_requests, a gauge).
	Watches map[string]float64
	// Lists: LIST requests served (apiserver_request_total, a counter).
	Lists map[string]float64
	// Requests: every request served but WATCHes, by verb
	// (apiserver_request_total): what else the components ask.
	Requests map[string]float64
	// Events and EventBytes: watch events sent to clients and their encoded
	// size (apiserver_watch_events_total, apiserver_watch_events_sizes_sum).
	Events, EventBytes map[string]float64
	// HeapInuse is go_memstats_heap_inuse_bytes (0 when not exposed);
	// Goroutines is go_goroutines.
	HeapInuse, Goroutines float64
}

// APICountersFrom picks the watch and list series out of a parsed /metrics
// page of kube-apiserver.
func APICountersFrom(s scenarios.Samples) APICounters {
	c := APICounters{Watches: map[string]float64{}, Lists: map[string]float64{}, Requests: map[string]float64{},
		Events: map[string]float64{}, EventBytes: map[string]float64{}}
	for _, x := range s {
		res := x.Labels["resource"]
		switch x.Name {
		case "apiserver_longrunning_requests":
			if x.Labels["verb"] == "WATCH" {
				c.Watches[res] += x.Value
			}
		case "apiserver_request_total":
			if x.Labels["verb"] == "LIST" {
				c.Lists[res] += x.Value
			}
			if v := x.Labels["verb"]; v != "WATCH" {
				c.Requests[v] += x.Value
			}
		case "apiserver_watch_events_total":
			c.Events[res] += x.Value
		case "apiserver_watch_events_sizes_sum":
			c.EventBytes[res] += x.Value
		case "go_memstats_heap_inuse_bytes":
			c.HeapInuse = x.Value
		case "go_goroutines":
			c.Goroutines = x.Value
		}
	}
	return c
}

// Sub is c - o for every series: for the counters the growth between two
// scrapes, for the gauges the change.
func (c APICounters) Sub(o APICounters) APICounters {
	return APICounters{Watches: subMap(c.Watches, o.Watches), Lists: subMap(c.Lists, o.Lists), Requests: subMap(c.Requests, o.Requests),
		Events: subMap(c.Events, o.Events), EventBytes: subMap(c.EventBytes, o.EventBytes),
		HeapInuse: c.HeapInuse - o.HeapInuse, Goroutines: c.Goroutines - o.Goroutines}
}

func subMap(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok && v != 0 {
			out[k] = -v
		}
	}
	return out
}

func sumMap(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func scaleMap(m map[string]float64, f float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v * f
	}
	return out
}

// addMap adds b into a (a may be nil).
func addMap(a, b map[string]float64) map[string]float64 {
	if a == nil {
		a = map[string]float64{}
	}
	for k, v := range b {
		a[k] += v
	}
	return a
}

// RSSStats are a process's RSS samples over a window.
type RSSStats struct {
	Mean, Max int64
	Samples   int
}

// RSSOf summarises samples (bytes).
func RSSOf(samples []int64) RSSStats {
	var st RSSStats
	var sum int64
	for _, v := range samples {
		sum += v
		st.Max = max(st.Max, v)
	}
	if st.Samples = len(samples); st.Samples > 0 {
		st.Mean = sum / int64(len(samples))
	}
	return st
}

// CostWindow is one measured churn window of the watch-cost benchmark.
type CostWindow struct {
	Kind                  int
	Took                  time.Duration
	Changes, ChangeErrors int
	// NodePatches: Node status heartbeats patched beside the changes
	// (CostConfig.NodeRate).
	NodePatches, NodePatchErrors int
	API, Etcd                    time.Duration // utime+stime over the window
	APIRSS, EtcdRSS              RSSStats
	// Before and After are the API server's counters scraped just outside
	// the CPU reads (a scrape costs the API server CPU of its own).
	Before, After      APICounters
	LoadStart, LoadEnd string
}

// KindCost is the average of one component set's windows, per second of
// window.
type KindCost struct {
	Kind, Runs int
	// APICores and EtcdCores: CPU seconds per second of window; PerChange:
	// the API server's CPU per change made.
	APICores, EtcdCores float64
	PerChange           time.Duration
	APIRSS, EtcdRSS     int64 // mean of the windows' mean RSS
	HeapInuse           float64
	Watches             map[string]float64 // open at the windows' ends
	EventsPerSec        map[string]float64
	BytesPerSec         map[string]float64
	RequestsPerSec      map[string]float64 // by verb, WATCH aside
	// Spread is max-min of APICores over the runs (0 with one run): the
	// noise between windows of the same set.
	Spread float64
}

// SummarizeCost averages the windows of each component set; a set with no
// window has Runs 0.
func SummarizeCost(ws []CostWindow) [3]KindCost {
	var out [3]KindCost
	var perChange [3]float64
	var lo, hi [3]float64
	for _, w := range ws {
		if w.Kind < 0 || w.Kind > 2 || w.Took <= 0 {
			continue
		}
		k := &out[w.Kind]
		s := w.Took.Seconds()
		cores := w.API.Seconds() / s
		if k.Runs == 0 || cores < lo[w.Kind] {
			lo[w.Kind] = cores
		}
		hi[w.Kind] = max(hi[w.Kind], cores)
		k.Runs++
		k.APICores += cores
		k.EtcdCores += w.Etcd.Seconds() / s
		if n := w.Changes + w.NodePatches; n > 0 {
			perChange[w.Kind] += w.API.Seconds() / float64(n)
		}
		k.APIRSS += w.APIRSS.Mean
		k.EtcdRSS += w.EtcdRSS.Mean
		k.HeapInuse += w.After.HeapInuse
		k.Watches = addMap(k.Watches, w.After.Watches)
		d := w.After.Sub(w.Before)
		k.EventsPerSec = addMap(k.EventsPerSec, scaleMap(d.Events, 1/s))
		k.BytesPerSec = addMap(k.BytesPerSec, scaleMap(d.EventBytes, 1/s))
		k.RequestsPerSec = addMap(k.RequestsPerSec, scaleMap(d.Requests, 1/s))
	}
	for i := range out {
		k := &out[i]
		k.Kind = i
		if k.Runs == 0 {
			continue
		}
		n := float64(k.Runs)
		k.APICores /= n
		k.EtcdCores /= n
		k.PerChange = time.Duration(perChange[i] / n * float64(time.Second))
		k.APIRSS /= int64(k.Runs)
		k.EtcdRSS /= int64(k.Runs)
		k.HeapInuse /= n
		k.Watches = scaleMap(k.Watches, 1/n)
		k.EventsPerSec = scaleMap(k.EventsPerSec, 1/n)
		k.BytesPerSec = scaleMap(k.BytesPerSec, 1/n)
		k.RequestsPerSec = scaleMap(k.RequestsPerSec, 1/n)
		k.Spread = hi[i] - lo[i]
	}
	return out
}

// Increment is what one component set adds over another (b - a).
type Increment struct {
	APICores, EtcdCores float64
	PerChange           time.Duration
	APIRSS              int64
	HeapInuse           float64
	Watches             map[string]float64
	EventsPerSec        map[string]float64
	BytesPerSec         map[string]float64
	RequestsPerSec      map[string]float64
}

// Diff is the increment of b over a.
func Diff(b, a KindCost) Increment {
	return Increment{APICores: b.APICores - a.APICores, EtcdCores: b.EtcdCores - a.EtcdCores,
		PerChange: b.PerChange - a.PerChange, APIRSS: b.APIRSS - a.APIRSS, HeapInuse: b.HeapInuse - a.HeapInuse,
		Watches: subMap(b.Watches, a.Watches), EventsPerSec: subMap(b.EventsPerSec, a.EventsPerSec),
		BytesPerSec: subMap(b.BytesPerSec, a.BytesPerSec), RequestsPerSec: subMap(b.RequestsPerSec, a.RequestsPerSec)}
}

// Derived is the benchmark's answer: what the N kube-proxies (1-0) and the
// N agents (2-1) cost the API server, and their ratio.
type Derived struct {
	Proxies, Agents Increment
	// CPURatio is Agents.APICores / Proxies.APICores (NaN-free: 0 when the
	// kube-proxies' increment is not positive, and then Comparable is false).
	CPURatio   float64
	Comparable bool
	// Noise is the largest spread between windows of one set (cores): an
	// increment smaller than it is not told apart from zero.
	Noise float64
}

// Derive computes the increments from the averaged sets. It needs all
// three sets measured.
func Derive(k [3]KindCost) (Derived, error) {
	for _, c := range k {
		if c.Runs == 0 {
			return Derived{}, fmt.Errorf("no window of set %q: the order must hold 0, 1 and 2", KindNames[c.Kind])
		}
	}
	d := Derived{Proxies: Diff(k[KindProxies], k[KindNone]), Agents: Diff(k[KindAgents], k[KindProxies])}
	for _, c := range k {
		d.Noise = max(d.Noise, c.Spread)
	}
	if d.Proxies.APICores > 0 {
		d.CPURatio = d.Agents.APICores / d.Proxies.APICores
		d.Comparable = true
	}
	return d, nil
}

// ParseOrder reads a window order such as "0 1 2 1": sets 0, 1 and 2, each
// at least once.
func ParseOrder(fields []string) ([]int, error) {
	var out []int
	var seen [3]bool
	for _, f := range fields {
		switch f {
		case "0", "1", "2":
			k := int(f[0] - '0')
			out = append(out, k)
			seen[k] = true
		default:
			return nil, fmt.Errorf("window order: %q is not a set; want 0 (none), 1 (kube-proxies) or 2 (kube-proxies + agents), e.g. \"0 1 2 1\"", f)
		}
	}
	for k, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("window order %v has no window of set %d: want each of 0, 1 and 2 at least once", fields, k)
		}
	}
	return out, nil
}

// sortedKeys lists the keys of the maps, sorted.
func sortedKeys(ms ...map[string]float64) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// RatioRange is the range of a/b when each may be off by noise: lo from
// a-noise over b+noise (never below 0), hi from a+noise over b-noise;
// bounded is false when b-noise is not positive (no upper bound).
func RatioRange(a, b, noise float64) (lo, hi float64, bounded bool) {
	if b+noise > 0 {
		lo = max(0, a-noise) / (b + noise)
	}
	if b-noise <= 0 {
		return lo, 0, false
	}
	return lo, (a + noise) / (b - noise), true
}
