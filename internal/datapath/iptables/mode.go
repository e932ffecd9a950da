package iptables

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
)

// Mode is the iptables mode's reader: kube-proxy's iptables rules, read by
// the best path the node allows, with its fallbacks. With the nft backend
// (iptables-nft, the default of current distributions) it reads the
// nf_tables tables in process over netlink (NFTReader): no
// iptables-save, and a change event re-reads only the chains it names. It
// falls back to iptables-save, with the reason in the observation's
// warnings, when the netlink read fails (a rule it cannot decode, no
// nf_tables access) and tries netlink again after nlRetryAfter.
//
// When the iptables-save read fails too (the command absent, refused, or
// silent for saveTimeout), it reads kube-proxy's chains one by one with the
// iptables command (go-iptables, mode_chains.go), with the reason in the
// warnings and as the fallback in force, and tries iptables-save again
// after nlRetryAfter.
//
// On the iptables-save path it dumps, unless the backend is iptables-nft
// and the nf_tables generation has not moved since the last dump began:
// then the rules are the same and the O(1) generation check replaces a
// full dump. New hints re-parse the cached dump; they never re-dump.
type Mode struct {
	r     *Reader
	netns string
	nl    *NFTReader // nil: iptables-save only

	mu      sync.Mutex
	hints   model.Hints
	gen     uint32           // nf_tables generation before the cached dump began
	genConn nfevents.GenConn // the iptables-save path's generation queries, one kept socket
	dumps   *Dumps           // nil: no usable cache
	obs     model.Observed
	parsed  bool      // obs is the parse of dumps with hints
	nlOK    bool      // the backend is nft: the netlink reader applies
	nlPath  pathState // the netlink reader's fallback to iptables-save
	inProc  bool      // the last read was in process (no CPU to report)
	// fromNL: the last Snapshot returned the netlink reader's observation,
	// whose frontends its next ApplyEvent changes in place (Frozen)
	fromNL atomic.Bool

	lg     legacyState // the in-process iptables-legacy path (mode_legacy.go)
	chains chainState  // the per-chain read, when iptables-save fails (mode_chains.go)
}

// OpenMode builds the iptables mode's reader for netns ("" = own): over
// netlink for iptables-nft, in process for iptables-legacy, iptables-save
// as the fallback of both. The backend is detected at the first read.
func OpenMode(netns string) *Mode {
	return &Mode{r: &Reader{Config: Config{NetNS: netns, IPv6: true}}, netns: netns,
		nl: &NFTReader{NetNS: netns, IPv6: true},
		lg: legacyState{lr: &LegacyReader{NetNS: netns, IPv6: true}}}
}

// versioned stamps a new parse or walk with the reader's next version.
func (k *Mode) versioned(obs model.Observed) model.Observed {
	obs.Version = nfevents.NextVersion() // one sequence with every reader's versions
	return obs
}

// nlRetryAfter is how long a fallback to iptables-save lasts before the
// netlink reader is tried again.
const nlRetryAfter = 5 * time.Minute

// nlRetryAt is when the netlink reader is tried again after err. A read
// that failed only because kube-proxy kept committing through it falls
// back to iptables-save for that read alone: the next read tries netlink
// again (iptables-save of a table that busy costs far more). Any other
// failure (a rule it cannot decode, no nf_tables access) lasts
// nlRetryAfter.
func nlRetryAt(err error, now time.Time) time.Time {
	if Transient(err) {
		return now
	}
	return now.Add(nlRetryAfter)
}

func (k *Mode) Name() string { return model.ModeIPTables }

func (k *Mode) SetHints(h model.Hints) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.hints, k.parsed = h, false
	k.lg.hintsGen++
	k.r.SetHints(h)
}

// ApplyChange hands an nf_tables change event to the netlink reader, which
// patches the chains of ip/ip6 nat and filter from the event's rule
// messages (datapath.WatchChanges carries them) and re-reads any other it names. On the
// iptables-save path the event moves the generation, which the next
// Snapshot sees; nothing to do.
//
// It owns the event and releases its op memory when done (the contract:
// package nfevents): the netlink reader keeps nothing of the rule messages
// but their decoded rules, and ignores set and element messages.
func (k *Mode) ApplyChange(ctx context.Context, ev nfevents.Event) error {
	defer ev.Release()
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.netlinkActive() {
		return nil
	}
	return k.nl.ApplyEvent(ctx, ev)
}

// Resync drops the netlink reader's tables and the cached dump, and makes
// the in-process legacy reader walk its next read again.
func (k *Mode) Resync() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.nl != nil {
		k.nl.Drop()
	}
	k.dumps, k.parsed = nil, false
	k.lg.hintsGen++
}

// RequestAudit (datapath.AuditRequester): while the netlink reader is in
// use, its next Snapshot reads everything and compares it with the
// patched tables it keeps (an audit, deferred while commits interrupt it);
// on the other paths the next read is a fresh one, as after Resync.
func (k *Mode) RequestAudit() {
	k.mu.Lock()
	inNL := k.netlinkActive() && k.inProc
	k.mu.Unlock()
	if inNL && k.nl.RequestAudit() {
		return
	}
	k.Resync()
}

// Evented: the netlink reader is in use (iptables-nft), whose state the
// nf_tables events describe.
func (k *Mode) Evented() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.netlinkActive() && k.inProc
}

// SelfAudits counts the netlink reader's audits of the chains it patched
// from rule messages, those that found a difference, and those put off
// because commits kept interrupting their read.
func (k *Mode) SelfAudits() (audits, differed, deferred uint64) {
	if k.nl == nil {
		return 0, 0, 0
	}
	st := k.nl.Stats()
	return uint64(st.Audits), uint64(st.AuditDiffs), uint64(st.AuditsDeferred)
}

// Frozen is the netlink reader's (datapath.Freezer) while the last
// Snapshot came from it; the other paths' observations are never changed.
// It takes no lock of this reader: a read may be running.
func (k *Mode) Frozen() (model.Observed, bool) {
	if k.nl == nil || !k.fromNL.Load() {
		return model.Observed{}, false
	}
	return k.nl.Frozen()
}

// LastReadCPU is the CPU time the last dump cost (iptables-save
// processes); 0 after an in-process netlink read. A per-chain read reports
// its wall time: its commands run one after another, so it bounds their CPU.
func (k *Mode) LastReadCPU() time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.inProc:
		return 0
	case k.chains.used:
		return k.chains.cost
	}
	return k.r.Stats().CPU
}

// netlinkActive: the netlink reader is configured, the backend is nft and
// no fallback is in force.
func (k *Mode) netlinkActive() bool {
	if k.nl == nil || !k.nlOK {
		return false
	}
	return k.nlPath.usable(time.Now())
}

// Snapshot reads the datapath. It never writes.
func (k *Mode) Snapshot(ctx context.Context) (model.Observed, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.nl != nil && !k.nlOK {
		k.nlOK = k.nftBackend()
	}
	if k.netlinkActive() {
		obs, err := k.nl.Snapshot(ctx, k.hints)
		switch {
		case err != nil:
			now := time.Now()
			k.nlPath.failed(err, now, nlRetryAt(err, now))
		case len(obs.Frontends) == 0 && k.r.Config.Backend != BackendNFT:
			// Nothing in nf_tables: maybe kube-proxy moved to the legacy
			// backend. The iptables-save path detects again.
			k.nlOK = false
		default:
			k.nlPath.succeeded()
			k.inProc = true
			k.dropSaveCache()
			k.fromNL.Store(true)
			return obs, nil // versioned by the netlink reader: a new version whenever it walked again
		}
	}
	k.fromNL.Store(false)
	if obs, ok := k.legacySnapshot(ctx); ok {
		return obs, nil
	}
	k.inProc = false
	obs, err := k.saveOrChains(ctx)
	if err != nil {
		return obs, err
	}
	obs = k.legacyAfterSave(obs)
	if k.nlPath.inForce() && k.nlOK && !k.chains.used {
		obs.Warnings = append(slices.Clip(obs.Warnings), "iptables-nft tables not read over netlink, read with iptables-save instead: "+k.nlPath.off)
	}
	if k.nl != nil && k.r.Stats().Backend == BackendNFT {
		k.nlOK = true
	}
	return obs, nil
}

// Fallback is the fallback in force (datapath.FallbackReporter), as the
// last read's warnings state it; from "" when none.
func (k *Mode) Fallback() (from, to, reason string, since time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.inProc:
	case k.chains.used:
		return k.chainsFallback()
	case k.nlPath.inForce() && k.nlOK:
		return "netlink", "iptables-save", k.nlPath.off, k.nlPath.since
	case k.lg.path.inForce() && k.lg.ok:
		return "in-process", "iptables-legacy-save", k.lg.path.off, k.lg.path.since
	}
	return "", "", "", time.Time{}
}

// nftBackend reports whether the configured or obvious backend is nft
// without running iptables-save: configured so, or auto and the kernel has
// no legacy nat table (reading it would be the only reason to choose
// legacy). Otherwise the iptables-save path's detection decides.
func (k *Mode) nftBackend() bool {
	switch k.r.Config.Backend {
	case BackendNFT:
		return true
	case BackendLegacy:
		return false
	}
	names, err := nsutil.ReadProcNet(k.netns, "ip_tables_names")
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) // no ip_tables module: no legacy tables
	}
	return !strings.Contains(names, "nat")
}

// saveSnapshot is the iptables-save path.
func (k *Mode) saveSnapshot(ctx context.Context) (model.Observed, error) {
	k.genConn.NetNS = k.netns
	gen, genErr := k.genConn.Generation()
	if genErr == nil && k.dumps != nil && gen == k.gen && k.r.Stats().Backend == BackendNFT {
		if !k.parsed {
			obs, err := Parse(*k.dumps, k.hints)
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
	obs, err := Parse(dumps, k.hints)
	if err != nil {
		return model.Observed{}, fmt.Errorf("iptables (%s backend): %w", st.Backend, err)
	}
	obs = k.versioned(obs)
	if genErr == nil && st.Backend == BackendNFT {
		// Only an nft-backend dump can be reused (while the generation
		// stands); a legacy one has no generation to check it by.
		k.dumps, k.gen, k.obs, k.parsed = &dumps, gen, obs, true
	}
	return obs, nil
}

// dropSaveCache lets the iptables-save path's cached dump and parse go
// once an in-process reader serves: in a large cluster the text and its
// parse are tens of megabytes, kept for a fallback that reads again anyway.
func (k *Mode) dropSaveCache() {
	k.dumps, k.obs, k.parsed = nil, model.Observed{}, false
}
