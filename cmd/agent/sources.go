package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/ipvs"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/watch"
)

// knownSource refreshes a reader's knowledge of the cluster (service ports
// and frontend kinds, to resolve hashed or truncated names) before each read,
// and skips reads the kernel says are unnecessary.
type knownSource struct {
	mode  string
	netns string
	ipt   *datapath.IPTables
	nft   *datapath.NFTables
	ipvs  *ipvs.Reader
	known func() model.Desired

	mu       sync.Mutex
	iptGen   uint32 // nf_tables generation before the cached iptables dump began
	iptCache *model.Observed
}

func (k *knownSource) Name() string { return k.mode }

func (k *knownSource) desired() model.Desired {
	if k.known == nil {
		return model.Desired{}
	}
	return k.known()
}

// Snapshot reads the datapath. It never writes.
func (k *knownSource) Snapshot(ctx context.Context) (model.Observed, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.ipt != nil: // its Known callback asks for the desired state only when it parses a dump
		return k.iptSnapshot(ctx)
	case k.nft != nil:
		k.nft.Config.Options = datapath.NFTOptionsFor(k.desired())
		return k.nft.Snapshot(ctx)
	case k.ipvs != nil:
		k.ipvs.SetOptions(ipvs.OptionsFromDesired(k.desired()))
		return k.ipvs.Snapshot(ctx)
	}
	return model.Observed{Datapath: model.ModeNone}, nil
}

// iptSnapshot dumps iptables, unless the backend is iptables-nft and the
// nf_tables generation has not moved since the last dump began: then the
// rules are the same and the O(1) generation check replaces a full dump.
func (k *knownSource) iptSnapshot(ctx context.Context) (model.Observed, error) {
	gen, genErr := datapath.NFTGeneration(k.netns)
	if genErr == nil && k.iptCache != nil && gen == k.iptGen && k.ipt.Stats().Backend == datapath.BackendNFT {
		return *k.iptCache, nil
	}
	obs, err := k.ipt.Snapshot(ctx)
	if err != nil || genErr != nil {
		k.iptCache = nil
		return obs, err
	}
	k.iptCache, k.iptGen = &obs, gen
	return obs, nil
}

// ApplyChange feeds an nf_tables change event to the reader: in nftables
// mode only the chains and maps it names are re-read, so the next Snapshot
// is cheap.
func (k *knownSource) ApplyChange(ctx context.Context, ev datapath.ChangeEvent) {
	if k.nft == nil {
		return
	}
	d := k.desired()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.nft.Config.Options = datapath.NFTOptionsFor(d)
	_, _ = k.nft.Update(ctx, ev)
}

// LastReadCPU is the CPU time the last dump cost (iptables-save processes);
// zero when unknown (in-process netlink reads: wall time is used).
func (k *knownSource) LastReadCPU() time.Duration {
	if k.ipt != nil {
		return k.ipt.Stats().CPU
	}
	return 0
}

// newSource builds the reader for a datapath mode inside netns ("" = own).
func newSource(mode, netns string, known func() model.Desired) (*knownSource, error) {
	k := &knownSource{mode: mode, netns: netns, known: known}
	switch mode {
	case model.ModeIPTables:
		k.ipt = &datapath.IPTables{Config: datapath.IPTablesConfig{NetNS: netns, IPv6: true},
			Known: func() datapath.ParseOptions {
				if known == nil {
					return datapath.ParseOptions{}
				}
				return datapath.OptionsFor(known())
			}}
	case model.ModeNFTables:
		k.nft = &datapath.NFTables{Config: datapath.NFTConfig{NetNS: netns}}
	case model.ModeIPVS:
		k.ipvs = ipvs.NewReader(ipvs.Config{Netns: netns})
	default:
		return nil, fmt.Errorf("unknown datapath mode %q (want iptables, nftables or ipvs)", mode)
	}
	return k, nil
}

// resolveMode turns --datapath (auto or a mode) into a mode and a reason.
func resolveMode(ctx context.Context, flagMode, netns string) (string, string, error) {
	if flagMode != "" && flagMode != "auto" {
		return flagMode, "set by --datapath", nil
	}
	return datapath.DetectMode(ctx, netns)
}

// observeOther parses captured nftables JSON or ipvsadm-save output.
func observeOther(d *dumpFlags, desired model.Desired) (model.Observed, error) {
	if d.ipvsadm != "" {
		data, err := os.ReadFile(d.ipvsadm)
		if err != nil {
			return model.Observed{}, err
		}
		t, err := ipvs.ParseSave(data)
		if err != nil {
			return model.Observed{}, fmt.Errorf("%s: %w", d.ipvsadm, err)
		}
		return ipvs.Build(t, ipvs.OptionsFromDesired(desired)), nil
	}
	v4, err := os.ReadFile(d.nftJSON)
	if err != nil {
		return model.Observed{}, err
	}
	var v6 []byte
	if d.nft6JSON != "" {
		if v6, err = os.ReadFile(d.nft6JSON); err != nil {
			return model.Observed{}, err
		}
	}
	obs, err := datapath.ParseNFTJSON(v4, v6, datapath.NFTOptionsFor(desired))
	if err != nil {
		return obs, fmt.Errorf("%s: %w", d.nftJSON, err)
	}
	return obs, nil
}

// observeLive detects the mode in netns and reads it.
func observeLive(ctx context.Context, d *dumpFlags, desired model.Desired) (model.Observed, error) {
	mode, reason, err := resolveMode(ctx, "auto", d.netns)
	if err != nil {
		return model.Observed{}, err
	}
	if mode == model.ModeNone {
		return model.Observed{Datapath: model.ModeNone, Warnings: []string{reason}}, nil
	}
	src, err := newSource(mode, d.netns, func() model.Desired { return desired })
	if err != nil {
		return model.Observed{}, err
	}
	return src.Snapshot(ctx)
}

// offlineNodeFindings runs the node-level rules: cluster-scope rules always,
// route/link/conntrack rules only when a live netns is read.
func offlineNodeFindings(ctx context.Context, node string, cs *watch.ClusterState, desired model.Desired, netns string) ([]model.Finding, []string) {
	in := watch.NodeCheckInputs(node, cs)
	in.Desired = desired.Frontends
	var warnings []string
	if netns != "" {
		snap, err := datapath.NodeState(ctx, netns)
		if err != nil {
			warnings = append(warnings, "node state: "+err.Error())
		} else {
			in.Snapshot = &snap
			warnings = append(warnings, snap.Warnings...)
		}
	}
	f, _ := nodecheck.Check(in, nodecheck.Config{}, nowFunc())
	return f, warnings
}
