package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/capture"
	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/datapath/cilium"
	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/watch"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// dumpFlags name captured datapath dumps (or a live netns).
type dumpFlags struct{ capture.Files }

func (d *dumpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.IPTables, "iptables-save", "", "iptables-save output (nat and filter tables; `iptables -S` is read too)")
	fs.StringVar(&d.IP6Tables, "ip6tables-save", "", "ip6tables-save output")
	fs.StringVar(&d.NFTJSON, "nft-json", "", "output of `nft -j list ruleset` (both families) or `nft -j list table ip kube-proxy`")
	fs.StringVar(&d.NFT6JSON, "nft6-json", "", "output of `nft -j list table ip6 kube-proxy`")
	fs.StringVar(&d.IPVSAdm, "ipvsadm-save", "", "output of `ipvsadm -Sn` (or `ipvsadm -Ln`)")
	fs.StringVar(&d.CiliumLB, "cilium-lb", "", "output of `cilium-dbg bpf lb list -o json` on a Cilium (kube-proxy-free) node")
	fs.StringVar(&d.BPFFS, "bpffs", "", "read Cilium's service maps pinned in this bpf filesystem (live, e.g. /sys/fs/bpf)")
	fs.StringVar(&d.NetNS, "netns", "", "read the live datapath inside this named network namespace")
}

// paths are the files the diff reads (none for a live read, whose size
// is not known up front).
func (d *dumpFlags) paths(clusters []string) []string {
	if d.NetNS != "" {
		return nil
	}
	return append(slices.Clone(clusters), d.IPTables, d.IP6Tables, d.NFTJSON, d.NFT6JSON, d.IPVSAdm, d.CiliumLB)
}

func RunDiff(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var clusters multiFlag
	var dumps dumpFlags
	node := fs.String("node", "", "node whose datapath the dump comes from (required)")
	fs.Var(&clusters, "cluster", "cluster objects as `kubectl get services,endpointslices,nodes -A -o json|yaml` prints (repeatable)")
	dumps.register(fs)
	clusterCIDR := fs.String("cluster-cidr", "", "pod network CIDRs, comma separated, for the node-level checks with --netns (default: from Node podCIDRs)")
	out := fs.String("o", "table", "output: table or json")
	if err := fs.Parse(args); err != nil {
		return ExitError
	}
	if err := checkOutput(*out); err != nil {
		fmt.Fprintln(stderr, "netdrift diff:", err)
		return ExitError
	}
	var nodeCfg nodecheck.Config
	cidrs, err := nodecheck.ParseClusterCIDRs(*clusterCIDR)
	if err != nil {
		fmt.Fprintf(stderr, "netdrift diff: --cluster-cidr: %v (want CIDRs such as 10.244.0.0/16,fd00:10:244::/56)\n", err)
		return ExitError
	}
	nodeCfg.ClusterCIDRs = cidrs
	if *node == "" || len(clusters) == 0 || dumps.Empty() {
		fmt.Fprintln(stderr, "netdrift diff: need --node, at least one --cluster FILE, and a datapath dump (or --netns)")
		return ExitError
	}
	defer offlineGC(dumps.paths(clusters)...)()
	cs, err := loadCluster(clusters, *node)
	if err != nil {
		fmt.Fprintln(stderr, "netdrift diff:", err)
		return ExitError
	}
	desired := watch.Expected(*node, cs)
	ctx := context.Background()
	obs, err := capture.Observe(ctx, dumps.Files, desired)
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
	nf, warnings := capture.NodeFindings(ctx, *node, cs, desired, dumps.NetNS, nodeCfg, time.Now())
	findings = append(findings, nf...)
	model.SortFindings(findings)
	rep := api.DiffReport{Node: *node, Datapath: obs.Datapath, Findings: api.FindingsOf(findings),
		Warnings: append(append(scopeWarnings, obs.Warnings...), warnings...)}
	if *out == "json" {
		printJSON(stdout, rep)
	} else {
		printFindingsTable(stdout, rep.Node, rep.Datapath, rep.Findings, rep.Warnings, *out == "wide")
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
