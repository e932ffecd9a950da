package bench

import (
	"fmt"
	"io"
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
	if c.ProxyStart == "running" {
		fmt.Fprintf(w, "\nset-up: lab up %s; objects created in %s with kube-proxy running; it held every service %s after the last create, using %s CPU over both (%s own + %s children)\n",
			sec(r.LabUp), sec(r.CreateTook), sec(r.ProxyCaughtUp), sec(r.ProxyCreateCPU.Total()), sec(r.ProxyCreateCPU.Self()), sec(r.ProxyCreateCPU.Children()))
	} else {
		fmt.Fprintf(w, "\nset-up: lab up %s; objects created in %s (kube-proxy stopped meanwhile)\n", sec(r.LabUp), sec(r.CreateTook))
	}

	if r.StartupTook > 0 {
		fmt.Fprintln(w, "\nstart-up (agent start -> ready: first full comparison, nothing pending, no finding):")
		row("", "wall", "CPU", "agent/this CPU")
		row("agent", sec(r.StartupTook), sec(r.StartupCPU.Total()), "")
		if r.ProxySyncedAfter > 0 {
			row("kube-proxy (start -> first full sync)", sec(r.ProxySyncedAfter), sec(r.ProxySyncCPU.Total()),
				ratio(r.StartupCPU.Total().Seconds(), r.ProxySyncCPU.Total().Seconds()))
		}
		for _, ref := range r.Refs {
			row(ref.Cmd, sec(ref.Wall), sec(ref.CPU), ratio(r.StartupCPU.Total().Seconds(), ref.CPU.Seconds()))
		}
		tw.Flush()
		fmt.Fprintf(w, "agent RSS at ready %s; %.0f frontends observed; table dump %d bytes\n", mib(r.StartupRSS), r.Frontends, refBytes(r.Refs))
	}

	if r.Idle != nil || len(r.Churn) > 0 {
		fmt.Fprintln(w, "\nCPU over the same window (utime+stime + cutime+cstime of reaped children, /proc/PID/stat):")
		row("window", "secs", "changes", "agent", "(children)", "kube-proxy", "(children)", "agent/kube-proxy", "agent/change", "kube-proxy/change", "agent %core", "kube-proxy %core", "load start", "load end")
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
				per(x.Agent.Total()), per(x.Proxy.Total()),
				pctCore(x.Agent.Total(), x.Took), pctCore(x.Proxy.Total(), x.Took), x.LoadStart, x.LoadEnd)
		}
		tw.Flush()
		for _, x := range ws {
			if x.AgentLiveKids+x.ProxyLiveKids > 0 {
				fmt.Fprintf(w, "%s: children still running at the window's end (counted up to it from their /proc/PID/stat): agent %d, kube-proxy %d\n",
					x.Name, x.AgentLiveKids, x.ProxyLiveKids)
			}
		}
	}
	if r.AgentMem.HWM > 0 {
		fmt.Fprintf(w, "\npeak RSS (VmHWM): agent %s, kube-proxy %s, agent/kube-proxy %s (RSS now %s / %s)\n",
			mib(r.AgentMem.HWM), mib(r.ProxyMem.HWM), ratio(float64(r.AgentMem.HWM), float64(r.ProxyMem.HWM)),
			mib(r.AgentMem.RSS), mib(r.ProxyMem.RSS))
	}
	if len(r.Churn) > 0 {
		fmt.Fprintln(w, "\nsamples per change and lag precision (|agent T2 - kube-proxy's logged sync completion|, matched as lab/scenarios lagprecision does):")
		row("window", "changes", "errors", "samples", "(metric)", "superseded", "pending", "missing", "samples/change", "kp syncs", "p50", "p90", "p99", "max", "T2 outside its sync", "no sync", "agent T2-T0 mean", "kube-proxy netprog mean", "drain")
		for _, x := range r.Churn {
			row(x.Name, fmt.Sprint(x.Changes), fmt.Sprint(x.ChangeErrors), fmt.Sprint(x.Samples), fmt.Sprint(x.SamplesMetric),
				fmt.Sprint(x.Superseded), fmt.Sprint(x.PendingAtEnd), fmt.Sprint(x.Missing()),
				ratio(float64(max(x.Samples, x.SamplesMetric)), float64(x.Changes-x.ChangeErrors)), fmt.Sprint(x.ProxySyncs),
				ms(scenarios.Quantile(x.Precision, .5)), ms(scenarios.Quantile(x.Precision, .9)),
				ms(scenarios.Quantile(x.Precision, .99)), ms(scenarios.Quantile(x.Precision, 1)),
				fmt.Sprintf("%d/%d", x.OutsideSync, len(x.Precision)), fmt.Sprint(x.PrecisionNoSync),
				ms(x.AgentT2T0Mean), fmt.Sprintf("%s (%d)", ms(x.ProxyNetProg), x.ProxyNetProgN), sec(x.DrainTook))
		}
		tw.Flush()
		for _, x := range r.Churn {
			if x.SamplesMetric > x.Samples {
				fmt.Fprintf(w, "%s: /v1/lag listed %d samples, the metric counted %d (the listing keeps the newest 1,000): precision is over the listed ones\n",
					x.Name, x.Samples, x.SamplesMetric)
			}
			for _, e := range x.LagPollErrors {
				fmt.Fprintf(w, "%s: /v1/lag poll failed: %s\n", x.Name, e)
			}
			for _, c := range x.MissingChanges {
				fmt.Fprintf(w, "%s: no sample, no counted reason: %s changed at %s\n", x.Name, c.Service, c.At.Format("15:04:05.000"))
			}
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func refBytes(rs []RefDump) int {
	if len(rs) == 0 {
		return 0
	}
	return rs[0].Bytes
}
