package datapath

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nftables"
	"github.com/netdrift/netdrift/internal/ipvs"
	"github.com/netdrift/netdrift/internal/model"
)

// ParseMode checks a --datapath value: auto or a mode name.
func ParseMode(s string) (string, error) {
	switch s {
	case "auto", model.ModeIPTables, model.ModeNFTables, model.ModeIPVS:
		return s, nil
	}
	return "", fmt.Errorf("unknown datapath mode %q (want auto, iptables, nftables or ipvs)", s)
}

// Open builds the reader for a datapath mode inside netns ("" = own).
func Open(mode, netns string) (Reader, error) {
	switch mode {
	case model.ModeIPTables:
		return &iptablesReader{r: &iptables.Reader{Config: iptables.Config{NetNS: netns, IPv6: true}}, netns: netns}, nil
	case model.ModeNFTables:
		return nftablesReader{&nftables.Reader{Config: nftables.Config{NetNS: netns}}}, nil
	case model.ModeIPVS:
		return ipvsReader{ipvs.NewReader(ipvs.Config{NetNS: netns})}, nil
	}
	return nil, fmt.Errorf("unknown datapath mode %q (want iptables, nftables or ipvs)", mode)
}

// Resolve turns --datapath (auto or a mode) into a mode and the reason.
func Resolve(ctx context.Context, flagMode, netns string) (mode, reason string, err error) {
	if flagMode != "" && flagMode != "auto" {
		return flagMode, "set by --datapath", nil
	}
	return DetectMode(ctx, netns)
}

// nftablesReader is the nftables reader; it implements Reader natively but
// for the read cost (in process: wall time is the cost).
type nftablesReader struct{ *nftables.Reader }

func (nftablesReader) LastReadCPU() time.Duration { return 0 }

// ipvsReader adds the parts of Reader IPVS has no use for: IPVS publishes
// no change events, and reads are in process.
type ipvsReader struct{ *ipvs.Reader }

func (ipvsReader) ApplyChange(context.Context, ChangeEvent) error { return nil }
func (ipvsReader) LastReadCPU() time.Duration                     { return 0 }

// iptablesReader dumps iptables, unless the backend is iptables-nft and the
// nf_tables generation has not moved since the last dump began: then the
// rules are the same and the O(1) generation check replaces a full dump.
// New hints re-parse the cached dump; they never re-dump.
type iptablesReader struct {
	r     *iptables.Reader
	netns string

	mu      sync.Mutex
	hints   model.Hints
	gen     uint32          // nf_tables generation before the cached dump began
	dumps   *iptables.Dumps // nil: no usable cache
	obs     model.Observed
	parsed  bool   // obs is the parse of dumps with hints
	version uint64 // of the last parse (model.Observed.Version)
}

// versioned stamps a new parse with the reader's next version.
func (k *iptablesReader) versioned(obs model.Observed) model.Observed {
	if k.version == 0 {
		k.version = uint64(time.Now().UnixNano()) // distinct from another reader's versions
	}
	k.version++
	obs.Version = k.version
	return obs
}

func (k *iptablesReader) Name() string { return model.ModeIPTables }

func (k *iptablesReader) SetHints(h model.Hints) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.hints, k.parsed = h, false
	k.r.SetHints(h)
}

// ApplyChange: an nf_tables event moves the generation, which the next
// Snapshot sees; nothing to do here.
func (k *iptablesReader) ApplyChange(context.Context, ChangeEvent) error { return nil }

// LastReadCPU is the CPU time the last dump cost (iptables-save processes).
func (k *iptablesReader) LastReadCPU() time.Duration { return k.r.Stats().CPU }

// Snapshot reads the datapath. It never writes.
func (k *iptablesReader) Snapshot(ctx context.Context) (model.Observed, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	gen, genErr := nftables.Generation(k.netns)
	if genErr == nil && k.dumps != nil && gen == k.gen && k.r.Stats().Backend == iptables.BackendNFT {
		if !k.parsed {
			obs, err := iptables.Parse(*k.dumps, k.hints)
			if err != nil {
				return model.Observed{}, err
			}
			k.obs, k.parsed = k.versioned(obs), true
		}
		return k.obs, nil
	}
	k.dumps = nil
	dumps, st, err := k.r.Fetch(ctx)
	if err != nil {
		return model.Observed{}, err
	}
	obs, err := iptables.Parse(dumps, k.hints)
	if err != nil {
		return model.Observed{}, fmt.Errorf("iptables (%s backend): %w", st.Backend, err)
	}
	obs = k.versioned(obs)
	if genErr == nil {
		k.dumps, k.gen, k.obs, k.parsed = &dumps, gen, obs, true
	}
	return obs, nil
}
