package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/capture"
	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/datapath/cilium"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/watch"
)

// dumpFlags name captured datapath dumps (or a live netns).
type dumpFlags struct{ capture.Files }

// register adds the dump flags; a word in backquotes is the placeholder
// help shows for the flag's value (FILE, DIR, NAME).
func (d *dumpFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&d.IPTables, "iptables-save", "", "`FILE` of iptables-save output (nat and filter tables; iptables -S output is read too)")
	fs.StringVar(&d.IP6Tables, "ip6tables-save", "", "`FILE` of ip6tables-save output")
	fs.StringVar(&d.NFTJSON, "nft-json", "", "`FILE` of nft -j list ruleset output (both families), or of nft -j list table ip kube-proxy")
	fs.StringVar(&d.NFT6JSON, "nft6-json", "", "`FILE` of nft -j list table ip6 kube-proxy output")
	fs.StringVar(&d.IPVSAdm, "ipvsadm-save", "", "`FILE` of ipvsadm -Sn (or ipvsadm -Ln) output")
	fs.StringVar(&d.CiliumLB, "cilium-lb", "", "`FILE` of cilium-dbg bpf lb list -o json output, from a Cilium (kube-proxy-free) node")
	fs.StringVar(&d.BPFFS, "bpffs", "", "read Cilium's service maps pinned in the bpf filesystem at `DIR` (live, e.g. /sys/fs/bpf)")
	fs.StringVar(&d.NetNS, "netns", "", "read the live datapath inside the named network namespace `NAME`")
}

// paths are the files the diff reads (none for a live read, whose size
// is not known up front).
func (d *dumpFlags) paths(clusters []string) []string {
	if d.NetNS != "" {
		return nil
	}
	return append(slices.Clone(clusters), d.IPTables, d.IP6Tables, d.NFTJSON, d.NFT6JSON, d.IPVSAdm, d.CiliumLB)
}

// diffFlags are the flags of `netdrift diff`.
type diffFlags struct {
	node, clusterCIDR string
	clusters          []string
	dumps             dumpFlags
	*output
}

func newDiffCommand() *cobra.Command {
	f := &diffFlags{}
	cmd := &cobra.Command{
		Use:   "diff --node NODE --cluster FILE (--iptables-save FILE | --nft-json FILE | ... | --netns NAME)",
		Short: "compare captured cluster state and datapath dumps offline (exit 1 when there are findings)",
		Example: "  kubectl get services,endpointslices,nodes -A -o json > cluster.json\n" +
			"  netdrift diff --node worker-a --cluster cluster.json --iptables-save worker-a.iptables-save",
		Args: exactArgs(0),
	}
	fs := cmd.Flags()
	fs.StringVar(&f.node, "node", "", "`NODE` whose datapath the dump comes from (required)")
	fs.StringArrayVar(&f.clusters, "cluster", nil, "`FILE` of cluster objects as kubectl get services,endpointslices,nodes -A -o json (or yaml) prints (repeatable)")
	f.dumps.register(fs)
	fs.StringVar(&f.clusterCIDR, "cluster-cidr", "", "pod network `CIDRs`, comma separated, for the node-level checks with --netns (default: from Node podCIDRs)")
	f.output = addOutputFlag(cmd, allOutputs...)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := f.check(); err != nil {
			return err
		}
		return exit(runDiff(f, cmd.OutOrStdout(), cmd.ErrOrStderr()))
	}
	return cmd
}

func runDiff(f *diffFlags, stdout, stderr io.Writer) int {
	var nodeCfg nodecheck.Config
	cidrs, err := nodecheck.ParseClusterCIDRs(f.clusterCIDR)
	if err != nil {
		fmt.Fprintf(stderr, "netdrift diff: --cluster-cidr: %v (want CIDRs such as 10.244.0.0/16,fd00:10:244::/56)\n", err)
		return ExitError
	}
	nodeCfg.ClusterCIDRs = cidrs
	if f.node == "" || len(f.clusters) == 0 || f.dumps.Empty() {
		fmt.Fprintln(stderr, "netdrift diff: need --node, at least one --cluster FILE, and a datapath dump (or --netns)")
		return ExitError
	}
	defer offlineGC(f.dumps.paths(f.clusters)...)()
	cs, err := loadCluster(f.clusters, f.node)
	if err != nil {
		fmt.Fprintln(stderr, "netdrift diff:", err)
		return ExitError
	}
	desired := watch.Expected(f.node, cs)
	ctx := context.Background()
	obs, err := capture.Observe(ctx, f.dumps.Files, desired)
	if err != nil {
		fmt.Fprintln(stderr, "netdrift diff:", err)
		return ExitError
	}
	if obs.Datapath == model.ModeCilium { // Cilium's semantics, not kube-proxy's
		desired = cilium.Desired(desired, cilium.Semantics{})
	}
	compared, scopeWarnings := obs.Scope(desired)
	var findings []model.Finding
	if obs.Datapath != model.ModeNone {
		findings = drift.Compare(compared, obs.Observed)
	}
	nf, warnings := capture.NodeFindings(ctx, f.node, cs, desired, f.dumps.NetNS, nodeCfg, time.Now())
	findings = append(findings, nf...)
	model.SortFindings(findings)
	rep := api.DiffReport{Node: f.node, Datapath: obs.Datapath, Findings: api.FindingsOf(findings),
		Warnings: append(append(scopeWarnings, obs.Warnings...), warnings...)}
	if f.document() {
		f.print(stdout, rep)
	} else {
		printFindingsTable(stdout, rep.Node, rep.Datapath, rep.Findings, rep.Warnings, f.wide())
	}
	if len(findings) > 0 {
		return ExitFindings
	}
	return ExitOK
}

// loadCluster loads the cluster files and refuses those that cannot
// support an answer for node (clusterfile.Check, clusterfile.CheckNode).
func loadCluster(paths []string, node string) (*watch.ClusterState, error) {
	cs, err := clusterfile.LoadFiles(paths...)
	if err != nil {
		return nil, err
	}
	if err := clusterfile.Check(cs, paths); err != nil {
		return nil, err
	}
	if err := clusterfile.CheckNode(cs, node); err != nil {
		return nil, err
	}
	return cs, nil
}

func printFindingsTable(w io.Writer, node, dp string, fs []api.Finding, warnings []string, wide bool) {
	fmt.Fprintf(w, "node %s  datapath %s  findings %d\n", node, dp, len(fs))
	writeFindings(w, "KIND", fs, wide)
	for _, wn := range warnings {
		fmt.Fprintln(w, "warning:", wn)
	}
}

// writeFindings prints findings as a table that fits 100 columns, with each
// finding's detail on the line below it; wide cuts nothing and adds when
// each finding was first seen (RFC 3339).
func writeFindings(w io.Writer, title string, fs []api.Finding, wide bool) {
	if len(fs) == 0 {
		return
	}
	// The kind is never cut: it is what the reader acts on.
	t := newTable(title, "SERVICE", "FRONTEND", "BACKEND", "AGE").limit(0, 26, 24, 22, 7).names(1, 2, 3)
	if wide {
		t = newTable(title, "SERVICE", "FRONTEND", "BACKEND", "AGE", "FIRST SEEN")
	}
	for _, f := range fs {
		fe := f.Frontend
		if fe == "" {
			fe = f.Subject
		}
		row := []string{f.Kind, dash(strings.TrimSuffix(f.Service+":"+f.Port, ":")), dash(fe), dash(f.Backend), age(f.AgeSeconds)}
		if wide {
			row = append(row, firstSeen(f.FirstSeen))
		}
		t.add(row...)
		t.add("  ↳ " + f.Detail)
		if f.Connections != nil {
			t.add(fmt.Sprintf("  ↳ %d new connections sent to this backend while found", *f.Connections))
		}
	}
	t.writeSpanning(w)
}

func firstSeen(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return timestamp(*t)
}
