package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netdrift/netdrift/lab/scenarios"
)

// ciliumSetup says what a cilium-mode run compares.
const ciliumSetup = `cilium mode: no kube-proxy. cilium-lb (Cilium v1.20.2's Kubernetes reflectors, StateDB tables and BPF
  reconciler, lab/cilium) writes the node's service maps into a bpffs of the node's own; the agent runs with
  --datapath=cilium --cilium-write-stamp=auto on that bpffs (the lab's agent flags) and reads the maps in process:
  they publish no change events, so it polls while a change is pending, and the kernel's map-write stamp, where it
  attaches, dates T2 and spares a poll the read of maps nobody wrote since. Where fexit is refused, auto stamps from
  the system-call tracepoints, which every process on the host pays for, cilium-lb included.
  The reference full read is Cilium's own cilium-dbg listing of the same maps; its CPU
  includes its wrapper (unshare, sh, one umount -l per other bpf mount of the host: cilium-dbg reads the first).
  cilium-lb's start-up ends at the first once-a-second listing that gives every service all its backends.`

// proxyName is the node's service proxy in mode.
func proxyName(mode string) string {
	if m, ok := Modes[mode]; ok {
		return m.Proxy
	}
	return "kube-proxy"
}

// proxyStartLabel is the start-up table's row of the service proxy.
func proxyStartLabel(mode string) string {
	if isCilium(mode) {
		return "cilium-lb (start -> every service's backends in its maps)"
	}
	return "kube-proxy (start -> first full sync)"
}

// writeCiliumLag is the samples-per-change and lag table of a cilium run.
// kube-proxy's two references do not exist here: the table says n/a and
// why rather than leave the columns out.
func writeCiliumLag(w io.Writer, churn []Window) {
	fmt.Fprintln(w, "\nsamples per change and the agent's lag (cilium mode):")
	fmt.Fprintln(w, "  T2-T0: the agent's T2 less T0 (the EndpointSlice's trigger-time annotation, written with the change): the API's")
	fmt.Fprintln(w, "    delivery to both watchers and cilium-lb's own batching and map write, then how T2 is dated (T2 dated by):")
	fmt.Fprintln(w, "    map-write-stamp: the kernel's stamp of the last write to the maps the agent's read found; read: the agent's read")
	fmt.Fprintln(w, "    that first saw the change (late by up to one poll interval plus the read).")
	fmt.Fprintln(w, "  against the write: n/a. The other modes' references are kube-proxy's: its logged sync completion (cilium-lb logs")
	fmt.Fprintln(w, "    none per write), its kubeproxy_* metrics (syncs, network programming: the lab starts cilium-lb without a metrics")
	fmt.Fprintln(w, "    listener) and the kernel's nf_tables commit notifications (a bpf map update notifies nothing); the harness has no")
	fmt.Fprintln(w, "    probe of its own on the maps to check the stamp against.")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	row("window", "changes", "errors", "samples", "(metric)", "superseded", "pending", "missing", "samples/change",
		"T2-T0 p50", "p90", "p99", "max", "mean", "(n)", "T2 dated by", "against the write", "drain")
	for _, x := range churn {
		q := func(p float64) string {
			if len(x.AgentT2T0) == 0 {
				return "n/a"
			}
			return ms(scenarios.Quantile(x.AgentT2T0, p))
		}
		row(x.Name, fmt.Sprint(x.Changes), fmt.Sprint(x.ChangeErrors), fmt.Sprint(x.Samples), fmt.Sprint(x.SamplesMetric),
			fmt.Sprint(x.Superseded), fmt.Sprint(x.PendingAtEnd), fmt.Sprint(x.Missing()),
			ratio(float64(max(x.Samples, x.SamplesMetric)), float64(x.Changes-x.ChangeErrors)),
			q(.5), q(.9), q(.99), q(1), meanOrNA(x), fmt.Sprint(len(x.AgentT2T0)), t2Sources(x.T2Sources),
			"n/a (no reference)", sec(x.DrainTook))
	}
	tw.Flush()
	writeChurnNotes(w, churn)
}

func meanOrNA(x Window) string {
	if len(x.AgentT2T0) == 0 {
		return "n/a"
	}
	return ms(x.AgentT2T0Mean)
}

// t2t0Quantiles is "p50 / p99" of a window's T2-T0, for the log.
func t2t0Quantiles(x Window) string {
	if len(x.AgentT2T0) == 0 {
		return "n/a (no sample with a trigger time)"
	}
	return fmt.Sprintf("%s / %s", scenarios.Quantile(x.AgentT2T0, .5).Round(time.Millisecond), scenarios.Quantile(x.AgentT2T0, .99).Round(time.Millisecond))
}

// t2Sources is "map-write-stamp 60" (the agent's read: "read").
func t2Sources(m map[string]int) string {
	named := map[string]int{}
	for k, v := range m {
		if k == "" {
			k = "read"
		}
		named[k] += v
	}
	return countsString(named)
}
