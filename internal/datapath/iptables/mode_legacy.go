package iptables

import (
	"context"
	"slices"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// legacyState is the iptables mode's in-process iptables-legacy path
// (LegacyReader): used once the backend is known to be legacy
// (configured, or detected by the iptables-save path), instead of forking
// iptables-legacy-save. A read it cannot decode falls back to
// iptables-legacy-save with the reason in the observation's warnings, and
// the in-process read is tried again after nlRetryAfter. A legacy nat table
// without KUBE-* chains hands the read back to the iptables-save path,
// whose detection may find kube-proxy on the nft backend.
type legacyState struct {
	lr       *LegacyReader // nil: iptables-legacy-save only
	ok       bool          // the backend is legacy
	path     pathState     // the in-process read's fallback to iptables-legacy-save
	hintsGen uint64        // counts SetHints
	obs      model.Observed
}

// legacyActive: configured, the backend is legacy and no fallback is in force.
func (k *Mode) legacyActive() bool {
	lg := &k.lg
	if lg.lr == nil {
		return false
	}
	if !lg.ok {
		lg.ok = k.r.Config.Backend == BackendLegacy
	}
	return lg.ok && lg.path.usable(time.Now())
}

// legacySnapshot reads in process; ok false: use the iptables-save path.
// An unchanged read returns the last observation (same Version).
func (k *Mode) legacySnapshot(ctx context.Context) (model.Observed, bool) {
	lg := &k.lg
	if !k.legacyActive() {
		return model.Observed{}, false
	}
	obs, fresh, kube, err := lg.lr.Snapshot(ctx, k.hints, lg.hintsGen)
	switch {
	case err != nil:
		now := time.Now()
		lg.path.failed(err, now, now.Add(nlRetryAfter))
		return model.Observed{}, false
	case kube == 0 && k.r.Config.Backend != BackendLegacy:
		lg.ok = false // detect again
		return model.Observed{}, false
	}
	lg.path.succeeded()
	k.inProc = true
	k.dropSaveCache()
	if fresh {
		lg.obs = k.versioned(obs)
	}
	return lg.obs, true
}

// legacyAfterSave notes, after an iptables-save read, a fallback in force
// and whether the backend detected is legacy.
func (k *Mode) legacyAfterSave(obs model.Observed) model.Observed {
	lg := &k.lg
	if lg.lr == nil {
		return obs
	}
	if lg.path.inForce() && lg.ok && !k.chains.used {
		obs.Warnings = append(slices.Clip(obs.Warnings), "iptables-legacy tables not read in process, read with iptables-legacy-save instead: "+lg.path.off)
	}
	if k.r.Stats().Backend == BackendLegacy {
		lg.ok = true
	}
	return obs
}
