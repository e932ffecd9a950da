package iptables

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// saveTimeout bounds an iptables-save read of the iptables mode: a save
// command that hangs fails the read, and the per-chain read takes over,
// instead of the agent waiting on it for ever.
const saveTimeout = time.Minute

// chainState is the iptables mode's last resort (mode_chains.go): when the
// whole-table iptables-save read fails (the save command absent, refused,
// hung), kube-proxy's chains are read one by one with the iptables command
// (chainRead) and fed to the same parser; iptables-save is tried again
// after nlRetryAfter. It helps where the save command is missing or broken
// but iptables itself runs.
type chainState struct {
	path    pathState     // iptables-save's fallback to the per-chain read
	used    bool          // the last read was per chain
	cost    time.Duration // its wall time (commands run one after another)
	timeout time.Duration // of an iptables-save read; 0: saveTimeout
}

// saveOrChains reads with iptables-save, or chain by chain while
// iptables-save fails.
func (k *Mode) saveOrChains(ctx context.Context) (model.Observed, error) {
	cs := &k.chains
	cs.used = false
	now := time.Now()
	if cs.path.usable(now) {
		obs, err := k.timedSave(ctx)
		if err == nil || ctx.Err() != nil {
			if err == nil {
				cs.path.succeeded()
			}
			return obs, err
		}
		cs.path.failed(err, now, now.Add(nlRetryAfter))
	}
	obs, err := k.chainSnapshot()
	if err != nil {
		return model.Observed{}, fmt.Errorf("iptables-save: %s; per-chain read: %w", cs.path.off, err)
	}
	obs.Warnings = append(slices.Clip(obs.Warnings), "iptables rules not read with iptables-save, read chain by chain with iptables -S instead: "+cs.path.off)
	return obs, nil
}

// timedSave is saveSnapshot bounded by the save timeout.
func (k *Mode) timedSave(ctx context.Context) (model.Observed, error) {
	d := k.chains.timeout
	if d == 0 {
		d = saveTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	obs, err := k.saveSnapshot(ctx)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("no answer within %s: %w", d, err)
	}
	return obs, err
}

// chainSnapshot reads per chain with the first backend whose chains hold
// kube-proxy's rules (the first backend when none does).
func (k *Mode) chainSnapshot() (model.Observed, error) {
	backends := k.chainBackends()
	var first *Dumps
	var errs []error
	var cost time.Duration
	for _, b := range backends {
		d, st, err := chainRead(k.netns, b, k.r.Config.IPv6)
		cost += st.Duration
		if err != nil {
			// the other backend's command may refuse the tables
			// (iptables-nft says a chain is "incompatible")
			errs = append(errs, err)
			continue
		}
		kube := strings.Contains(string(d.IPv4), "\n-A KUBE-") || strings.Contains(string(d.IPv6), "\n-A KUBE-")
		if first == nil || kube {
			first = &d
		}
		if kube {
			break
		}
	}
	if first == nil {
		return model.Observed{}, errors.Join(errs...)
	}
	k.chains.used, k.chains.cost = true, cost
	obs, err := Parse(*first, k.hints)
	if err != nil {
		return model.Observed{}, fmt.Errorf("per-chain read: %w", err)
	}
	return k.versioned(obs), nil
}

// chainBackends is the backends the per-chain read tries: the configured
// one, or the one the last iptables-save read detected, or nft alone when
// the kernel has no legacy nat table (listing it would create one), else
// legacy and then nft.
func (k *Mode) chainBackends() []string {
	switch b := k.r.Config.Backend; b {
	case BackendLegacy, BackendNFT:
		return []string{b}
	}
	if b := k.r.Stats().Backend; b != "" {
		return []string{b}
	}
	if k.nftBackend() {
		return []string{BackendNFT}
	}
	return []string{BackendLegacy, BackendNFT}
}

// chainsFallback is the per-chain read's fallback as Fallback reports it:
// from the mode's preferred path in force (netlink, in-process legacy,
// else iptables-save), with the reasons of every path given up.
func (k *Mode) chainsFallback() (from, to, reason string, since time.Time) {
	from, reason, since = "iptables-save", "iptables-save: "+k.chains.path.off, k.chains.path.since
	switch {
	case k.nlPath.inForce() && k.nlOK:
		from, reason, since = "netlink", "netlink: "+k.nlPath.off+"; "+reason, k.nlPath.since
	case k.lg.path.inForce() && k.lg.ok:
		from, reason, since = "in-process", "in-process: "+k.lg.path.off+"; "+reason, k.lg.path.since
	}
	return from, "iptables -S per chain", reason, since
}
