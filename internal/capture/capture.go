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
	"os"
	"time"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nftables"
	"github.com/netdrift/netdrift/internal/datapath/node"
	"github.com/netdrift/netdrift/internal/ipvs"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/watch"
)

// Files names captured datapath dumps, or a live network namespace.
type Files struct {
	IPTables, IP6Tables string // iptables-save / ip6tables-save output
	NFTJSON, NFT6JSON   string // nft -j list table ip / ip6 kube-proxy
	IPVSAdm             string // ipvsadm-save -n
	// NetNS, when set, reads the live datapath inside this network
	// namespace; the offline commands never read the machine otherwise.
	NetNS string
}

// count is how many datapaths the files name.
func (f Files) count() int {
	n := 0
	for _, s := range []string{f.IPTables, f.NFTJSON, f.IPVSAdm} {
		if s != "" {
			n++
		}
	}
	return n
}

// Empty reports whether neither a dump nor a namespace is given.
func (f Files) Empty() bool { return f.count() == 0 && f.NetNS == "" }

// Observe parses the given dumps (exactly one datapath) or reads the live one.
func Observe(ctx context.Context, f Files, desired model.Desired) (model.Observed, error) {
	hints := model.HintsFor(desired)
	switch {
	case f.count() > 1:
		return model.Observed{}, errors.New("give one datapath: --iptables-save, --nft-json or --ipvsadm-save")
	case f.IPTables != "":
		return observeIPTables(f, hints)
	case f.NFTJSON != "":
		return observeNFT(f, hints)
	case f.IPVSAdm != "":
		return observeIPVS(f, hints)
	}
	return observeLive(ctx, f.NetNS, hints)
}

func observeIPTables(f Files, hints model.Hints) (model.Observed, error) {
	v4, err := os.ReadFile(f.IPTables)
	if err != nil {
		return model.Observed{}, err
	}
	dumps := iptables.Dumps{IPv4: v4}
	if f.IP6Tables != "" {
		if dumps.IPv6, err = os.ReadFile(f.IP6Tables); err != nil {
			return model.Observed{}, err
		}
	}
	obs, err := iptables.Parse(dumps, hints)
	if err != nil {
		return obs, fmt.Errorf("%s: %w", f.IPTables, err)
	}
	return obs, nil
}

func observeNFT(f Files, hints model.Hints) (model.Observed, error) {
	v4, err := os.ReadFile(f.NFTJSON)
	if err != nil {
		return model.Observed{}, err
	}
	var v6 []byte
	if f.NFT6JSON != "" {
		if v6, err = os.ReadFile(f.NFT6JSON); err != nil {
			return model.Observed{}, err
		}
	}
	obs, err := nftables.ParseJSON(v4, v6, hints)
	if err != nil {
		return obs, fmt.Errorf("%s: %w", f.NFTJSON, err)
	}
	return obs, nil
}

func observeIPVS(f Files, hints model.Hints) (model.Observed, error) {
	data, err := os.ReadFile(f.IPVSAdm)
	if err != nil {
		return model.Observed{}, err
	}
	t, err := ipvs.ParseSave(data)
	if err != nil {
		return model.Observed{}, fmt.Errorf("%s: %w", f.IPVSAdm, err)
	}
	return ipvs.Build(t, ipvs.OptionsFor(hints)), nil
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
	in := watch.NodeCheckInputs(nodeName, cs)
	in.Desired = desired.Frontends
	var warnings []string
	if netns != "" {
		snap, err := node.Read(ctx, netns)
		if err != nil {
			warnings = append(warnings, "node state: "+err.Error())
		} else {
			in.Snapshot = &snap
			warnings = append(warnings, snap.Warnings...)
		}
	}
	f, _ := nodecheck.Check(in, cfg, now)
	return f, warnings
}
