// Package capture reads what a responder captured on a node — iptables-save,
// `nft -j list table`, ipvsadm-save output — or, when told to, the live
// datapath of a network namespace, into the observed model, and runs the
// node-level checks the agent runs. It serves the offline commands (`netdrift
// diff`, `netdrift snapshot`). See docs/architecture.md.
package capture

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/datapath/cilium"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nftables"
	"github.com/netdrift/netdrift/internal/datapath/node"
	"github.com/netdrift/netdrift/internal/ipvs"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/nodecheck/fromapi"
	"github.com/netdrift/netdrift/internal/watch"
)

// Files names captured datapath dumps, or a live network namespace.
type Files struct {
	IPTables, IP6Tables string // iptables-save / ip6tables-save output
	NFTJSON, NFT6JSON   string // nft -j list table ip / ip6 kube-proxy
	IPVSAdm             string // ipvsadm-save -n
	CiliumLB            string // cilium-dbg bpf lb list -o json (or its plain table)
	// BPFFS, when set, reads Cilium's service maps pinned in this bpf
	// filesystem (the live machine, read only when asked).
	BPFFS string
	// NetNS, when set, reads the live datapath inside this network
	// namespace; the offline commands never read the machine otherwise.
	NetNS string
}

// count is how many datapaths the files name (an IPv6 file alone counts:
// it is a capture, never a reason to read the live machine).
func (f Files) count() int {
	n := 0
	for _, s := range []string{f.IPTables + f.IP6Tables, f.NFTJSON + f.NFT6JSON, f.IPVSAdm, f.CiliumLB, f.BPFFS} {
		if s != "" {
			n++
		}
	}
	return n
}

// Empty reports whether neither a dump nor a namespace is given.
func (f Files) Empty() bool { return f.count() == 0 && f.NetNS == "" }

// Observation is what a capture holds, and which address families it
// covers: a frontend of another family cannot be compared.
type Observation struct {
	model.Observed
	Families map[model.IPFamily]bool
	// NoFilter are the families whose iptables capture lacks the filter
	// table (`iptables -t nat -S`): their reject and drop verdicts are unseen.
	NoFilter map[model.IPFamily]bool
}

// allFamilies is what a live read, or an ipvsadm dump (both families in
// one table), covers.
func allFamilies() map[model.IPFamily]bool {
	return map[model.IPFamily]bool{model.IPv4: true, model.IPv6: true}
}

// Observe parses the given dumps (exactly one datapath) or, when none is
// given, reads the live one in f.NetNS. (With both, the dumps are the
// datapath and the namespace serves only the node-level checks.)
func Observe(ctx context.Context, f Files, desired model.Desired) (Observation, error) {
	hints := model.HintsFor(desired)
	switch {
	case f.count() > 1:
		return Observation{}, errors.New("give one datapath: --iptables-save/--ip6tables-save, --nft-json/--nft6-json, --ipvsadm-save, --cilium-lb or --bpffs")
	case f.IPTables != "" || f.IP6Tables != "":
		return observeIPTables(f, hints)
	case f.NFTJSON != "" || f.NFT6JSON != "":
		return observeNFT(f, hints)
	case f.IPVSAdm != "":
		obs, err := observeIPVS(f, hints)
		return Observation{Observed: obs, Families: allFamilies()}, err
	case f.CiliumLB != "":
		obs, err := observeCiliumLB(f.CiliumLB, hints)
		return Observation{Observed: obs, Families: allFamilies()}, err
	case f.BPFFS != "":
		r := datapath.OpenCilium(f.BPFFS)
		r.SetHints(hints)
		obs, err := r.Snapshot(ctx)
		return Observation{Observed: obs, Families: allFamilies()}, PermissionHint(err, "")
	}
	obs, err := observeLive(ctx, f.NetNS, hints)
	return Observation{Observed: obs, Families: allFamilies()}, PermissionHint(err, f.NetNS)
}

// Scope removes from desired the frontends of the families the capture does
// not cover, with one warning per family: they are not compared, rather
// than reported missing.
func (o Observation) Scope(desired model.Desired) (model.Desired, []string) {
	out := model.Desired{Node: desired.Node, Frontends: make(map[model.Frontend]model.Verdict, len(desired.Frontends))}
	skipped, unfiltered := map[model.IPFamily]int{}, map[model.IPFamily]int{}
	for fe, v := range desired.Frontends {
		if o.Families != nil && !o.Families[fe.Family] {
			skipped[fe.Family]++
			continue
		}
		if o.NoFilter[fe.Family] && (v.Action == model.Reject || v.Action == model.Drop) {
			unfiltered[fe.Family]++
			continue
		}
		out.Frontends[fe] = v
	}
	var warnings []string
	for _, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
		if n := skipped[fam]; n > 0 {
			warnings = append(warnings, fmt.Sprintf("%s not captured: %d frontends not compared (%s)", fam, n, captureHint(fam)))
		}
		if n := unfiltered[fam]; n > 0 {
			warnings = append(warnings, fmt.Sprintf("%s filter table not captured: %d reject/drop frontends not compared (capture `iptables-save`, which prints every table)", fam, n))
		}
	}
	return out, warnings
}

func captureHint(fam model.IPFamily) string {
	if fam == model.IPv6 {
		return "add --ip6tables-save, --nft6-json, or an `nft -j list ruleset` that holds table ip6 kube-proxy"
	}
	return "add --iptables-save, or --nft-json with table ip kube-proxy"
}

// readDump reads a capture file ("-": standard input; gzip'd or not),
// naming its flag in errors: clusterfile.ReadInput, the one input opener.
func readDump(flag, path string) ([]byte, error) {
	return clusterfile.ReadInput(path, flag)
}

// observeIPTables reads iptables-save (and ip6tables-save) files. The family
// of each comes from its content (an ip6tables-save given as --iptables-save
// is read as IPv6); two files of one family, or one file holding both, are
// refused.
func observeIPTables(f Files, hints model.Hints) (Observation, error) {
	dumps := iptables.Dumps{HandedOver: true} // read from files for this parse alone
	files := map[model.IPFamily]string{}
	noFilter := map[model.IPFamily]bool{}
	var notes []string
	for _, in := range []struct {
		flag, path string
		fam        model.IPFamily
	}{{"--iptables-save", f.IPTables, model.IPv4}, {"--ip6tables-save", f.IP6Tables, model.IPv6}} {
		if in.path == "" {
			continue
		}
		name := clusterfile.InputName(in.path)
		data, err := readDump(in.flag, in.path)
		if err != nil {
			return Observation{}, err
		}
		fam := in.fam
		switch got, mixed, ok := iptables.DumpFamily(data); {
		case mixed:
			return Observation{}, fmt.Errorf("%s %s holds both IPv4 and IPv6 addresses (iptables-save and ip6tables-save in one file?): "+
				"give them as --iptables-save and --ip6tables-save", in.flag, name)
		case ok && got != fam:
			notes = append(notes, fmt.Sprintf("%s %s holds %s rules: read as %s", in.flag, name, got, got))
			fam = got
		}
		if prev, dup := files[fam]; dup {
			return Observation{}, fmt.Errorf("%s and %s both hold %s rules: give the ip6tables-save output as --ip6tables-save", prev, name, fam)
		}
		files[fam] = name
		if !iptables.HasTable(data, "filter") {
			noFilter[fam] = true
		}
		if fam == model.IPv4 {
			dumps.IPv4 = data
		} else {
			dumps.IPv6 = data
		}
	}
	obs, err := iptables.Parse(dumps, hints)
	if err != nil {
		return Observation{}, fmt.Errorf("%s: %w", familyFiles(files, err), err)
	}
	if err := checkIPTablesRules(f, dumps); err != nil {
		return Observation{}, err
	}
	obs.Warnings = append(notes, obs.Warnings...)
	fams := map[model.IPFamily]bool{}
	for fam := range files {
		fams[fam] = true
	}
	return Observation{Observed: obs, Families: fams, NoFilter: noFilter}, nil
}

// familyFiles names the file an iptables.Parse error is about (its
// message starts with the family).
func familyFiles(files map[model.IPFamily]string, err error) string {
	if strings.HasPrefix(err.Error(), string(model.IPv6)) && files[model.IPv6] != "" {
		return files[model.IPv6]
	}
	if files[model.IPv4] != "" {
		return files[model.IPv4]
	}
	return files[model.IPv6]
}

// observeNFT reads nft JSON. A file may hold both kube-proxy tables (`nft -j
// list ruleset`), so --nft-json is searched for table ip6 kube-proxy too
// when --nft6-json is not given, and a file given as --nft6-json alone is
// searched for both.
func observeNFT(f Files, hints model.Hints) (Observation, error) {
	var v4, v6 []byte
	var err error
	if f.NFTJSON != "" {
		if v4, err = readDump("--nft-json", f.NFTJSON); err != nil {
			return Observation{}, err
		}
		v6 = v4
	}
	if f.NFT6JSON != "" {
		if v6, err = readDump("--nft6-json", f.NFT6JSON); err != nil {
			return Observation{}, err
		}
		if v4 == nil {
			v4 = v6
		}
	}
	obs, tables, err := nftables.ParseJSONTables(v4, v6, hints)
	if err != nil {
		name := f.NFTJSON
		if name == "" || strings.HasPrefix(err.Error(), "ip6 ") && f.NFT6JSON != "" {
			name = f.NFT6JSON
		}
		return Observation{}, fmt.Errorf("%s: %w", clusterfile.InputName(name), err)
	}
	if len(tables) == 0 {
		return Observation{}, noNFTTable(strings.TrimSpace(clusterfile.InputName(f.NFTJSON) + " " + clusterfile.InputName(f.NFT6JSON)))
	}
	return Observation{Observed: obs, Families: tables}, nil
}

func observeIPVS(f Files, hints model.Hints) (model.Observed, error) {
	data, err := readDump("--ipvsadm-save", f.IPVSAdm)
	if err != nil {
		return model.Observed{}, err
	}
	t, err := ipvs.ParseSave(data)
	if err != nil {
		return model.Observed{}, fmt.Errorf("%s: %w", clusterfile.InputName(f.IPVSAdm), err)
	}
	if len(t.Services) == 0 {
		return model.Observed{}, noVirtualServers(clusterfile.InputName(f.IPVSAdm))
	}
	return ipvs.Build(t, ipvs.OptionsFor(hints)), nil
}

// observeCiliumLB reads what `cilium-dbg bpf lb list -o json` printed.
func observeCiliumLB(path string, hints model.Hints) (model.Observed, error) {
	data, err := readDump("--cilium-lb", path)
	if err != nil {
		return model.Observed{}, err
	}
	obs, err := cilium.ParseLBList(data, hints)
	if err != nil {
		return model.Observed{}, fmt.Errorf("%s: %w", clusterfile.InputName(path), err)
	}
	return obs, nil
}

// observeLive detects the mode in netns and reads it.
func observeLive(ctx context.Context, netns string, hints model.Hints) (model.Observed, error) {
	mode, reason, err := datapath.DetectMode(ctx, netns)
	if err != nil {
		return model.Observed{}, err
	}
	if mode == model.ModeNone {
		return model.Observed{Datapath: model.ModeNone, Warnings: []string{reason}}, nil
	}
	src, err := datapath.Open(mode, netns)
	if err != nil {
		return model.Observed{}, err
	}
	src.SetHints(hints)
	return src.Snapshot(ctx)
}

// NodeFindings runs the node-level rules: cluster-scope rules always,
// route/link/conntrack rules only when a live netns is read.
func NodeFindings(ctx context.Context, nodeName string, cs *watch.ClusterState, desired model.Desired,
	netns string, cfg nodecheck.Config, now time.Time) ([]model.Finding, []string) {
	in := fromapi.NodeCheckInputs(nodeName, cs)
	in.Desired = desired.Frontends
	var warnings []string
	if netns != "" {
		snap, err := node.Read(ctx, netns)
		if err != nil {
			warnings = append(warnings, "node state: "+PermissionHint(err, netns).Error())
		} else {
			in.Snapshot = &snap
			warnings = append(warnings, snap.Warnings...)
		}
	}
	f, _ := nodecheck.Check(in, cfg, now)
	return f, warnings
}
