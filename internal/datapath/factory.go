package datapath

import (
	"context"
	"fmt"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/datapath/nftables"
	"github.com/netdrift/netdrift/internal/ipvs"
	"github.com/netdrift/netdrift/internal/model"
)

// modeNames are the modes Open builds, for error messages.
const modeNames = "iptables, nftables, ipvs or cilium"

// ParseMode checks a --datapath value: auto or a mode name.
func ParseMode(s string) (string, error) {
	switch s {
	case "auto", model.ModeIPTables, model.ModeNFTables, model.ModeIPVS, model.ModeCilium:
		return s, nil
	}
	return "", fmt.Errorf("unknown datapath mode %q (want auto, %s)", s, modeNames)
}

// Open builds the reader for a datapath mode inside netns ("" = own): a
// thin factory, each mode's reader and its policies live in its package
// (the iptables mode's fallbacks: iptables.Mode).
func Open(mode, netns string) (Reader, error) {
	switch mode {
	case model.ModeIPTables:
		return iptables.OpenMode(netns), nil
	case model.ModeNFTables:
		return nftablesReader{&nftables.Reader{Config: nftables.Config{NetNS: netns}}}, nil
	case model.ModeIPVS:
		return ipvsReader{Reader: ipvs.NewReader(ipvs.Config{NetNS: netns})}, nil
	case model.ModeCilium:
		return OpenCilium(""), nil
	}
	return nil, fmt.Errorf("unknown datapath mode %q (want %s)", mode, modeNames)
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
func (nftablesReader) Evented() bool              { return true }

// RequestAudit (AuditRequester): an audit read beside the cache, or a
// Resync when nothing is cached.
func (r nftablesReader) RequestAudit() {
	if !r.Reader.RequestAudit() {
		r.Reader.Resync()
	}
}

// SelfAudits (SelfAuditor): the audit reads that replaced the cache and
// those put off by commits. The nftables audit does not compare what it
// read with the cache (differed is 0); the cache is replaced either way.
func (r nftablesReader) SelfAudits() (audits, differed, deferred uint64) {
	a, d := r.Reader.Audits()
	return uint64(a), 0, uint64(d)
}

// unevented is the part of Reader a source without nf_tables change events
// (IPVS, Cilium's maps) has no use for: it polls.
type unevented struct{}

func (unevented) ApplyChange(context.Context, ChangeEvent) error { return nil }
func (unevented) Evented() bool                                  { return false }

// ipvsReader adds the parts of Reader IPVS has no use for: IPVS publishes
// no change events, and reads are in process.
type ipvsReader struct {
	*ipvs.Reader
	unevented
}

func (ipvsReader) LastReadCPU() time.Duration { return 0 }

// Resync: the IPVS reader reads everything on every Snapshot already.
func (ipvsReader) Resync() {}

// Each mode's reader is a Reader; the event-fed ones keep an observation
// they change in place (Freezer) and take the full audit as an audit read
// beside it (AuditRequester), and the iptables mode audits what it patched
// from rule messages (SelfAuditor).
var (
	_ interface {
		Reader
		Freezer
		SelfAuditor
		AuditRequester
	} = (*iptables.Mode)(nil)
	_ interface {
		Reader
		Freezer
		AuditRequester
		SelfAuditor
	} = nftablesReader{}
	_ Reader = ipvsReader{}
)

// WatchChanges subscribes to nf_tables change events in netns ("" = own).
// Events carry the rule and chain messages of the tables iptables-nft
// writes (iptables.NFTTables: ip/ip6 nat and filter), which the
// iptables-nft netlink reader patches its chains from instead of reading
// them again, and the rule, chain, set and element messages of kube-proxy's
// nftables tables, which the nftables reader patches its cache from.
func WatchChanges(ctx context.Context, netns string) (*ChangeWatcher, error) {
	tables := append(append([]nfevents.TableRef(nil), iptables.NFTTables...), nftables.KubeProxyTables...)
	return nfevents.WatchWith(ctx, netns, nfevents.Options{OpTables: tables})
}
