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
  --datapath=cilium on that bpffs and reads the maps in process (they publish no change events: it polls while a
  change is pending). The reference full read is Cilium's own cilium-dbg listing of the same maps; its CPU
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
	fmt.Fprintln(w, "  T2-T0: the agent's T2 (its first read of the maps that saw the change) less T0 (the EndpointSlice's trigger-time")
	fmt.Fprintln(w, "    annotation, written with the change). It holds the API's delivery to both watchers, cilium-lb's own batching and")
	fmt.Fprintln(w, "    map writes, and the agent's poll (late by up to one poll interval plus the read): lag of the node, not precision.")
	fmt.Fprintln(w, "  against the write: n/a. The other modes' references are kube-proxy's: its logged sync completion (cilium-lb logs")
	fmt.Fprintln(w, "    none per write), its kubeproxy_* metrics (syncs, network programming: the lab starts cilium-lb without a metrics")
	fmt.Fprintln(w, "    listener) and the kernel's nf_tables commit notifications (a bpf map update notifies nothing).")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	row("window", "changes", "errors", "samples", "(metric)", "superseded", "pending", "missing", "samples/change",
		"T2-T0 p50", "p90", "p99", "max", "mean", "(n)", "against the write", "drain")
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
			q(.5), q(.9), q(.99), q(1), meanOrNA(x), fmt.Sprint(len(x.AgentT2T0)),
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
