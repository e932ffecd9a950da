package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netdrift/netdrift/lab/scenarios"
)

// ScaleName is "10k" for 10,000 and so on.
func ScaleName(endpoints int) string {
	switch {
	case endpoints >= 1000 && endpoints%1000 == 0:
		return fmt.Sprintf("%dk", endpoints/1000)
	default:
		return fmt.Sprint(endpoints)
	}
}

// ParseScale reads "10k", "100k", "1k" or a plain number of endpoints.
func ParseScale(s string) (int, error) {
	var n int
	if strings.HasSuffix(s, "k") {
		if _, err := fmt.Sscanf(strings.TrimSuffix(s, "k"), "%d", &n); err != nil {
			return 0, fmt.Errorf("scale %q: %w", s, err)
		}
		return n * 1000, nil
	}
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		return 0, fmt.Errorf("scale %q: %w", s, err)
	}
	return n, nil
}

func sec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func msec(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func pctCore(d, over time.Duration) string {
	if over <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f %%", 100*d.Seconds()/over.Seconds())
}

// Write prints the run's tables.
func (r *Result) Write(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "== bench-live %s, %s endpoints (%d services x %d), host %s, %s\n", c.Mode, ScaleName(c.Endpoints),
		r.Services, c.EndpointsPerService, r.Host, r.Started.Format(time.RFC3339))
	fmt.Fprintf(w, "load average (1/5/15 min) at start %s, at end %s; 2-core machine shared with other builds: CPU ratios are noisy\n",
		r.LoadStart, r.LoadEnd)
	if r.Err != nil {
		fmt.Fprintf(w, "ERROR: %v\n", r.Err)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	pn := proxyName(c.Mode)
	if c.ProxyStart == "running" {
		fmt.Fprintf(w, "\nset-up: lab up %s; objects created in %s with %s running; it held every service %s after the last create, using %s CPU over both (%s own + %s children)\n",
			sec(r.LabUp), sec(r.CreateTook), pn, sec(r.ProxyCaughtUp), sec(r.ProxyCreateCPU.Total()), sec(r.ProxyCreateCPU.Self()), sec(r.ProxyCreateCPU.Children()))
	} else {
		fmt.Fprintf(w, "\nset-up: lab up %s; objects created in %s (%s stopped meanwhile)\n", sec(r.LabUp), sec(r.CreateTook), pn)
	}
	if isCilium(c.Mode) {
		fmt.Fprintln(w, ciliumSetup)
	}

	if r.StartupTook > 0 {
		fmt.Fprintln(w, "\nstart-up (agent start -> ready: first full comparison, nothing pending, no finding):")
		row("", "wall", "CPU", "agent/this CPU")
		row("agent", sec(r.StartupTook), sec(r.StartupCPU.Total()), "")
		if r.ProxySyncedAfter > 0 {
			row(proxyStartLabel(c.Mode), sec(r.ProxySyncedAfter), sec(r.ProxySyncCPU.Total()),
				ratio(r.StartupCPU.Total().Seconds(), r.ProxySyncCPU.Total().Seconds()))
		}
		for _, ref := range r.Refs {
			row(ref.Cmd, sec(ref.Wall), sec(ref.CPU), ratio(r.StartupCPU.Total().Seconds(), ref.CPU.Seconds()))
		}
		tw.Flush()
		fmt.Fprintf(w, "agent RSS at ready %s; %.0f frontends observed; table dump %d bytes\n", mib(r.StartupRSS), r.Frontends, refBytes(r.Refs))
	}
	if o := r.Offline; o != nil {
		writeOffline(w, o)
	}

	if r.Idle != nil || len(r.Churn) > 0 {
		fmt.Fprintln(w, "\nCPU over the same window (utime+stime + cutime+cstime of reaped children, /proc/PID/stat):")
		row("window", "secs", "changes", "agent", "(children)", pn, "(children)", "agent/"+pn, "agent/change", "over idle", pn+"/change", "agent %core", pn+" %core",
			"watch-only", "watch-only/"+pn, "load start", "load end")
		ws := []Window{}
		if r.Idle != nil {
			ws = append(ws, *r.Idle)
		}
		ws = append(ws, r.Churn...)
		for _, x := range ws {
			per := func(d time.Duration) string {
				if x.Changes == 0 {
					return "-"
				}
				return ms(d / time.Duration(x.Changes))
			}
			row(x.Name, fmt.Sprintf("%.0f", x.Took.Seconds()), fmt.Sprint(x.Changes),
				sec(x.Agent.Total()), sec(x.Agent.Children()), sec(x.Proxy.Total()), sec(x.Proxy.Children()),
				ratio(x.Agent.Total().Seconds(), x.Proxy.Total().Seconds()),
				per(x.Agent.Total()), per(overIdle(x, r.Idle)), per(x.Proxy.Total()),
				pctCore(x.Agent.Total(), x.Took), pctCore(x.Proxy.Total(), x.Took),
				sec(x.WatchOnly.Total()), ratio(x.WatchOnly.Total().Seconds(), x.Proxy.Total().Seconds()), x.LoadStart, x.LoadEnd)
		}
		tw.Flush()
		fmt.Fprintln(w, "over idle: the agent's CPU per change less what it spends without changes (the idle window's rate over the churn window):")
		fmt.Fprintln(w, "  the cost of the changes themselves, without the budgeted background audits (node-level run, slow audit), which the idle column measures.")
		fmt.Fprintln(w, "watch-only: the lab's watchonly program in the node's namespace over the same window: client-go informers on what the agent watches")
		fmt.Fprintf(w, "  (protobuf; every Service, EndpointSlice and Node, the node's Pods and Lease) with handlers that do nothing. %s pays\n", pn)
		fmt.Fprintln(w, "  the same watch of Services and EndpointSlices: this share of the agent's CPU is the API watch's, not the agent's work.")
		for _, x := range ws {
			if x.AgentLiveKids+x.ProxyLiveKids > 0 {
				fmt.Fprintf(w, "%s: children still running at the window's end (counted up to it from their /proc/PID/stat): agent %d, %s %d\n",
					x.Name, x.AgentLiveKids, pn, x.ProxyLiveKids)
			}
		}
	}
	if r.AgentMem.HWM > 0 {
		fmt.Fprintf(w, "\npeak RSS (VmHWM): agent %s, %s %s, agent/%s %s (RSS now %s / %s)\n",
			mib(r.AgentMem.HWM), pn, mib(r.ProxyMem.HWM), pn, ratio(float64(r.AgentMem.HWM), float64(r.ProxyMem.HWM)),
			mib(r.AgentMem.RSS), mib(r.ProxyMem.RSS))
	}
	if len(r.Churn) > 0 && isCilium(c.Mode) {
		writeCiliumLag(w, r.Churn)
	} else if len(r.Churn) > 0 {
		fmt.Fprintln(w, "\nsamples per change and lag precision, against two references:")
		fmt.Fprintln(w, "  p50..max: |agent T2 - kube-proxy's logged sync completion| (\"SyncProxyRules complete\", matched as lab/scenarios lagprecision does).")
		fmt.Fprintln(w, "    kube-proxy logs it after its post-commit work (nft/iptables-restore exiting, health servers, metrics): late by a variable amount.")
		fmt.Fprintf(w, "  mon p50..max: |agent T2 - when the harness read the commit's NFT_MSG_NEWGEN from its own nf_tables netlink listener in the node's namespace|,\n")
		fmt.Fprintf(w, "    the commit nearest to T2 within ±%s among those whose messages named kube-proxy's IPv4 table(s) (%s).\n", monitorMatchWindow, strings.Join(ProxyTables(c.Mode), ", "))
		fmt.Fprintln(w, "    Independent of kube-proxy: the kernel's multicast of the NEWGEN message the agent dates T2 by, plus the listener's own wake-up;")
		fmt.Fprintln(w, "    it times the commit, it does not check that it was the right one.")
		fmt.Fprintln(w, "    mon unmatched: samples with no such commit within the window; T2>=mon: matched samples the agent dated at or after the listener's read;")
		fmt.Fprintln(w, "    mon span p50/max: over matched samples, the listener's read of its commit's first datagram -> the NEWGEN's (receiving the")
		fmt.Fprintln(w, "    transaction's messages, all queued at the commit); mon 1st p50/p99: |agent T2 - the read of that first datagram|.")
		fmt.Fprintf(w, "    A sample matches the commit whose read span (first datagram .. NEWGEN) is nearest its T2, within ±%s of the span.\n", monitorMatchWindow)
		row("window", "changes", "errors", "samples", "(metric)", "superseded", "pending", "missing", "samples/change", "kp syncs", "p50", "p90", "p99", "max", "T2 outside its sync", "no sync",
			"mon commits", "mon matched", "mon unmatched", "mon p50", "mon p90", "mon p99", "mon max", "T2>=mon", "mon span p50/max", "mon 1st p50/p99",
			"agent T2-T0 mean", "kube-proxy netprog mean", "drain")
		for _, x := range r.Churn {
			cells := []string{x.Name, fmt.Sprint(x.Changes), fmt.Sprint(x.ChangeErrors), fmt.Sprint(x.Samples), fmt.Sprint(x.SamplesMetric),
				fmt.Sprint(x.Superseded), fmt.Sprint(x.PendingAtEnd), fmt.Sprint(x.Missing()),
				ratio(float64(max(x.Samples, x.SamplesMetric)), float64(x.Changes-x.ChangeErrors)), fmt.Sprint(x.ProxySyncs),
				ms(scenarios.Quantile(x.Precision, .5)), ms(scenarios.Quantile(x.Precision, .9)),
				ms(scenarios.Quantile(x.Precision, .99)), ms(scenarios.Quantile(x.Precision, 1)),
				fmt.Sprintf("%d/%d", x.OutsideSync, len(x.Precision)), fmt.Sprint(x.PrecisionNoSync)}
			cells = append(cells, monCells(x)...)
			cells = append(cells, ms(x.AgentT2T0Mean), fmt.Sprintf("%s (%d)", ms(x.ProxyNetProg), x.ProxyNetProgN), sec(x.DrainTook))
			row(cells...)
		}
		tw.Flush()
		for _, x := range r.Churn {
			if !x.MonRunning {
				continue
			}
			fmt.Fprintf(w, "%s: the nf_tables listener read %d commits from the window's start to the drain's end (by process: %s), %d of them naming %s; its CPU %s (in neither process's figures)\n",
				x.Name, sumCounts(x.MonByProcess), countsString(x.MonByProcess), x.MonCommits, strings.Join(x.MonTables, " or "), sec(x.MonCPU))
			for _, s := range x.MonWorst {
				fmt.Fprintf(w, "%s: far from the kernel: %s\n", x.Name, s)
			}
			if x.MonOverruns > 0 {
				fmt.Fprintf(w, "%s: the kernel dropped notifications to the listener %d times (ENOBUFS): those commits are missing from its figures\n", x.Name, x.MonOverruns)
			}
			if x.MonExited {
				fmt.Fprintf(w, "%s: the nf_tables listener had stopped on an error by the drain's end: its figures cover only what it read before\n", x.Name)
			}
		}
		if r.Monitor != nil {
			fmt.Fprintf(w, "nf_tables listener over all churn windows: %d datagrams, %d commits, %d overruns, CPU %s\n", r.Monitor.Datagrams, r.Monitor.Commits, r.Monitor.Overruns, sec(r.Monitor.CPU))
		}
		writeChurnNotes(w, r.Churn)
	}
	if len(r.Soak) > 0 {
		writeSoak(w, r.Soak)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// monCells are the nf_tables listener columns of a churn window.
func monCells(x Window) []string {
	if x.MonTables == nil {
		return []string{"n/a (no nf_tables events)", "-", "-", "-", "-", "-", "-", "-", "-", "-"}
	}
	if !x.MonRunning {
		return []string{"n/a (no monitor)", "-", "-", "-", "-", "-", "-", "-", "-", "-"}
	}
	m := x.MonMatch
	return []string{fmt.Sprint(x.MonCommits), fmt.Sprint(len(m.Diffs)), fmt.Sprint(m.Unmatched),
		ms(scenarios.Quantile(m.Diffs, .5)), ms(scenarios.Quantile(m.Diffs, .9)),
		ms(scenarios.Quantile(m.Diffs, .99)), ms(scenarios.Quantile(m.Diffs, 1)),
		fmt.Sprintf("%d/%d", m.T2After, len(m.Diffs)),
		ms(scenarios.Quantile(m.Spans, .5)) + " / " + ms(scenarios.Quantile(m.Spans, 1)),
		ms(scenarios.Quantile(m.FromFirst, .5)) + " / " + ms(scenarios.Quantile(m.FromFirst, .99))}
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// countsString is "nft 61, iptables-nft 2" (most first, then by name).
func countsString(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		name := k
		if name == "" {
			name = "(unnamed)"
		}
		parts[i] = fmt.Sprintf("%s %d", name, m[k])
	}
	return strings.Join(parts, ", ")
}

func refBytes(rs []RefDump) int {
	if len(rs) == 0 {
		return 0
	}
	return rs[0].Bytes
}

func writeOffline(w io.Writer, o *OfflineDiff) {
	fmt.Fprintf(w, "\noffline `netdrift diff` of that table (before the agent started; a fresh process per run: start, both files, compare, report):\n")
	fmt.Fprintf(w, "  dump %d bytes (%s), cluster file %d bytes (services, EndpointSlices, nodes listed from the API, as kubectl -o json prints them)\n",
		o.DumpBytes, o.Ref.Cmd, o.ClusterBytes)
	cpus := make([]string, len(o.CPU))
	for i, c := range o.CPU {
		cpus[i] = msec(c)
	}
	med := o.Median()
	fmt.Fprintf(w, "  diff CPU per run %s; best %s, median %s; the dump's CPU %s (the cheaper reference run): diff/dump %s best, %s median\n",
		strings.Join(cpus, " "), msec(o.Best()), msec(med), msec(o.Ref.CPU),
		ratio(o.Best().Seconds(), o.Ref.CPU.Seconds()), ratio(med.Seconds(), o.Ref.CPU.Seconds()))
}

// overIdle is x's agent CPU less the idle window's rate of it over x's
// length (never below zero); x's own CPU when no idle window was measured.
func overIdle(x Window, idle *Window) time.Duration {
	if idle == nil || idle.Took <= 0 {
		return x.Agent.Total()
	}
	base := time.Duration(float64(idle.Agent.Total()) * x.Took.Seconds() / idle.Took.Seconds())
	return max(x.Agent.Total()-base, 0)
}

// writeChurnNotes says, per churn window, what the lag figures lack: the
// listing's cap, failed polls, changes with neither a sample nor a reason.
func writeChurnNotes(w io.Writer, churn []Window) {
	for _, x := range churn {
		if x.SamplesMetric > x.Samples {
			fmt.Fprintf(w, "%s: /v1/lag listed %d samples, the metric counted %d (the listing keeps the newest 1,000): lag figures are over the listed ones\n",
				x.Name, x.Samples, x.SamplesMetric)
		}
		if x.Dropped > 0 {
			fmt.Fprintf(w, "%s: %d changes dropped without a sample for a counted reason (netdrift_lag_samples_dropped_total: a full audit corrected the desired state they waited for)\n", x.Name, x.Dropped)
		}
		if x.ProxyNetProgN > 0 {
			fmt.Fprintf(w, "%s: kube-proxy's own histogram: %d of %d changes programmed more than %s after their trigger time (the agent rightly reports those stale while it lasts)\n",
				x.Name, x.ProxyLate, x.ProxyNetProgN, StaleAfter)
		}
		for _, e := range x.LagPollErrors {
			fmt.Fprintf(w, "%s: /v1/lag poll failed: %s\n", x.Name, e)
		}
		for _, c := range x.MissingChanges {
			fmt.Fprintf(w, "%s: no sample, no counted reason: %s changed at %s\n", x.Name, c.Service, c.At.Format("15:04:05.000"))
		}
	}
}
