package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

func pctCores(c float64) string { return fmt.Sprintf("%.1f %%", 100*c) }

func signedMiB(b float64) string { return fmt.Sprintf("%+.0f MiB", b/(1<<20)) }

func kib(b float64) string { return fmt.Sprintf("%.0f KiB", b/1024) }

func perChange(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// costRatio is a/b as "1.23x", or "n/a" when b is not positive or a is
// negative (an increment within the noise).
func costRatio(a, b float64) string {
	if b <= 0 || a < 0 || math.IsNaN(a) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// byResource is "endpointslices 20, services 20": the values at least
// "least" in absolute value (smaller ones are bookmarks and timing).
func byResource(m map[string]float64, least float64, f func(float64) string) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		if v := m[k]; math.Abs(v) >= least {
			parts = append(parts, k+" "+f(v))
		}
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

func num(v float64) string { return fmt.Sprintf("%.0f", v) }

func num2(v float64) string { return fmt.Sprintf("%.2f", v) }

// Write prints the run's tables (Markdown).
func (r *CostResult) Write(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "API server cost of watches: %d nodes, %d endpoints (%d services x %d), %g slice changes/s and %g node heartbeats/s, windows of %s in order %v, kube-proxy %s\n",
		c.Nodes, c.Endpoints, r.Services, c.EndpointsPerService, c.Rate, c.NodeRate, c.Window, c.Order, c.ProxyMode)
	fmt.Fprintf(w, "host %s, %s, lab up %s, objects created in %s, load %s -> %s\n\n", r.Host, r.Started.UTC().Format(time.RFC3339),
		r.LabUp.Round(time.Second), r.CreateTook.Round(time.Second), r.LoadStart, r.LoadEnd)
	r.writeWindows(w)
	if len(r.Windows) > 0 {
		r.writeDerived(w)
	}
	r.writeJoins(w)
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if r.Err != nil {
		fmt.Fprintln(w, "error:", r.Err)
	}
}

func (r *CostResult) writeWindows(w io.Writer) {
	fmt.Fprintln(w, "| # | set | writes: slice changes + node heartbeats | API server CPU | per write | RSS mean (max) | heap in use | etcd CPU | etcd RSS | WATCHes open | watch events/s | load 1m start, end |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for i, x := range r.Windows {
		s := x.Took.Seconds()
		ev := sumMap(x.After.Sub(x.Before).Events) / s
		pc := "n/a"
		if n := x.Changes + x.NodePatches; n > 0 {
			pc = perChange(x.API / time.Duration(n))
		}
		fmt.Fprintf(w, "| %d | %s | %d + %d nodes (%d failed) | %s | %s | %s (%s) | %s | %s | %s | %.0f | %.0f | %s, %s |\n",
			i+1, KindNames[x.Kind], x.Changes, x.NodePatches, x.ChangeErrors+x.NodePatchErrors, pctCores(x.API.Seconds()/s), pc,
			mib(x.APIRSS.Mean), mib(x.APIRSS.Max), mib(int64(x.After.HeapInuse)), pctCores(x.Etcd.Seconds()/s),
			mib(x.EtcdRSS.Mean), sumMap(x.After.Watches), ev, first(x.LoadStart), first(x.LoadEnd))
	}
	fmt.Fprintln(w)
}

func first(load string) string { return strings.Fields(load + " ?")[0] }

func (r *CostResult) writeDerived(w io.Writer) {
	k := SummarizeCost(r.Windows)
	fmt.Fprintln(w, "| set | windows | API server CPU (spread) | per write | RSS | heap in use | etcd CPU | WATCHes open | watch events/s | watch bytes/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, x := range k {
		if x.Runs == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s (%s) | %s | %s | %s | %s | %.0f | %.0f | %s |\n", KindNames[x.Kind], x.Runs,
			pctCores(x.APICores), pctCores(x.Spread), perChange(x.PerChange), mib(x.APIRSS), mib(int64(x.HeapInuse)),
			pctCores(x.EtcdCores), sumMap(x.Watches), sumMap(x.EventsPerSec), kib(sumMap(x.BytesPerSec)))
	}
	fmt.Fprintln(w)
	d, err := Derive(k)
	if err != nil {
		fmt.Fprintln(w, "no derived costs:", err)
		return
	}
	n := float64(r.Config.Nodes)
	fmt.Fprintln(w, "| cost of | API server CPU | per write | RSS | heap in use | etcd CPU | WATCHes opened (per component) | watch events/s | watch bytes/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	row := func(name string, x Increment) {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %.0f (%.1f) | %.0f | %s |\n", name, pctCores(x.APICores),
			perChange(x.PerChange), signedMiB(float64(x.APIRSS)), signedMiB(x.HeapInuse), pctCores(x.EtcdCores),
			sumMap(x.Watches), sumMap(x.Watches)/n, sumMap(x.EventsPerSec), kib(sumMap(x.BytesPerSec)))
	}
	row(fmt.Sprintf("%d kube-proxies (1−0)", r.Config.Nodes), d.Proxies)
	row(fmt.Sprintf("%d agents (2−1)", r.Config.Nodes), d.Agents)
	fmt.Fprintf(w, "| agents / kube-proxies | %s | %s | %s | %s | %s | %s | %s | %s |\n\n",
		costRatio(d.Agents.APICores, d.Proxies.APICores), costRatio(d.Agents.PerChange.Seconds(), d.Proxies.PerChange.Seconds()),
		costRatio(float64(d.Agents.APIRSS), float64(d.Proxies.APIRSS)), costRatio(d.Agents.HeapInuse, d.Proxies.HeapInuse),
		costRatio(d.Agents.EtcdCores, d.Proxies.EtcdCores), costRatio(sumMap(d.Agents.Watches), sumMap(d.Proxies.Watches)),
		costRatio(sumMap(d.Agents.EventsPerSec), sumMap(d.Proxies.EventsPerSec)),
		costRatio(sumMap(d.Agents.BytesPerSec), sumMap(d.Proxies.BytesPerSec)))
	fmt.Fprintf(w, "noise: the largest spread between windows of one set is %s of a core (API server CPU); the kube-proxies' increment %s ± %s, the agents' %s ± %s\n",
		pctCores(d.Noise), pctCores(d.Proxies.APICores), pctCores(d.Noise), pctCores(d.Agents.APICores), pctCores(d.Noise))
	fmt.Fprintf(w, "requests/s besides WATCH, by verb: set 0 %s; the kube-proxies add %s, the agents %s\n",
		byResource(k[KindNone].RequestsPerSec, 0.005, num2), byResource(d.Proxies.RequestsPerSec, 0.005, num2),
		byResource(d.Agents.RequestsPerSec, 0.005, num2))
	if lo, hi, ok := RatioRange(d.Agents.APICores, d.Proxies.APICores, d.Noise); ok {
		fmt.Fprintf(w, "agents / kube-proxies API server CPU within that noise: %.2fx to %.2fx\n\n", lo, hi)
	} else {
		fmt.Fprintf(w, "agents / kube-proxies API server CPU within that noise: at least %.2fx (the kube-proxies' increment is within the noise)\n\n", lo)
	}
	fmt.Fprintln(w, "| by resource (the components' own) | WATCHes kube-proxies | WATCHes agents | events/s kube-proxies | events/s agents | bytes/s kube-proxies | bytes/s agents |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, res := range sortedKeys(d.Proxies.Watches, d.Agents.Watches, d.Proxies.EventsPerSec, d.Agents.EventsPerSec) {
		if max(math.Abs(d.Proxies.Watches[res]), math.Abs(d.Agents.Watches[res])) < 0.5 &&
			max(math.Abs(d.Proxies.EventsPerSec[res]), math.Abs(d.Agents.EventsPerSec[res])) < 0.5 {
			continue // bookmarks and timing, no watch of these components
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.1f | %.1f | %s | %s |\n", res, d.Proxies.Watches[res], d.Agents.Watches[res],
			d.Proxies.EventsPerSec[res], d.Agents.EventsPerSec[res], kib(d.Proxies.BytesPerSec[res]), kib(d.Agents.BytesPerSec[res]))
	}
	fmt.Fprintln(w)
}

func (r *CostResult) writeJoins(w io.Writer) {
	if len(r.Joins) == 0 {
		return
	}
	fmt.Fprintln(w, "| start-up of | took | API server CPU | LISTs by resource | WATCHes opened by resource | watch events sent by resource | watch bytes sent |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, j := range r.Joins {
		fmt.Fprintf(w, "| %d %s | %s | %s | %s | %s | %s | %s |\n", r.Config.Nodes, j.Component, j.Took.Round(100*time.Millisecond),
			sec(j.API), byResource(j.Delta.Lists, 0.5, num), byResource(j.Delta.Watches, 0.5, num), byResource(j.Delta.Events, 10, num),
			kib(sumMap(j.Delta.EventBytes)))
	}
	fmt.Fprintln(w)
}
