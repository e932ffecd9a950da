package nftables

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/nftables"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
)

// Why netlink (github.com/google/nftables) and not sigs.k8s.io/knftables:
// knftables drives the nft binary, and every nft invocation reads the whole
// table to build its cache, even to list a single chain (see BENCHMARKS.md,
// Reading, "2. nftables"). Over netlink the reader asks the kernel for
// exactly the maps and chains it needs, one chain per request, and no
// process is spawned; that is also what lets the agent re-read only the
// chains a change event names. The netlink path reduces rules to the same
// intermediate form (nftTable) as the JSON parser, so live and offline
// reads of one table yield the same Observed (TestNFTLiveMatchesOffline).

// Config configures the live nftables reader.
type Config struct {
	// NetNS is the network namespace to read (a name under /run/netns or a
	// path like /proc/1/ns/net); "" reads the agent's own.
	NetNS string
	// Hints is what the API knows (service ports, frontend kinds); see SetHints.
	Hints model.Hints
	// Retries bounds re-reads when the ruleset changed during a read
	// (default 3, 10 ms apart, doubled each time); the last read is used,
	// with a warning, if none was stable.
	Retries int
	// BehindLimit bounds how long, once change events have been applied,
	// a Snapshot may return the cache while the kernel's generation is
	// ahead of it (the events of that generation are on their way: the
	// agent reads on a timer as well as on events) instead of reading both
	// tables again; past it the cache is taken as lost. Default 2 s.
	BehindLimit time.Duration
}

// Reader reads kube-proxy's nftables tables (ip and ip6 kube-proxy) over
// netlink. It implements Source. It never writes.
//
// It keeps what it read. Snapshot costs one generation query while nothing
// changed; Update applies a change event from the transaction's messages
// when it carries them all, else by re-reading only the chains and maps the
// event names (nothing for events about other tables).
//
// An endpoint change updates the frontends of the returned Observed in
// place (copying every frontend per change would make its cost grow with
// the cluster): the Frontends map of a returned Observed is valid until the
// caller's next Update, and Since/Changed name every frontend that changed
// since the last Snapshot returned. Callers that keep an observation, or
// hand it to another goroutine, take Frozen.
type Reader struct {
	Config Config

	mu        sync.Mutex
	pub       nfevents.Observation // the cache's evaluation (Version, Since, Changed, Frozen)
	cache     *nftCache
	rehint    bool // hints changed since the cache was evaluated
	fullReads int  // for tests: how many full reads ran
	// for tests: chain, set and chain-list requests to the kernel; events
	// applied from their messages (live_ops.go); events whose messages
	// did not decide and were read instead
	kernelReads, opPatches, opFallbacks int
	evented                             bool             // change events were applied: a generation ahead of the cache has events coming
	behind                              nfevents.Behind  // the wait for the events of a generation ahead of the cache
	gen                                 nfevents.GenConn // kept open for generation queries (one per poll)
	audit                               auditState       // RequestAudit's read beside the cache (live_audit.go)
}

// generationLocked asks the kernel for the nf_tables generation over a
// socket kept open (a poll costs one request, not a socket's creation and
// teardown); a failed request is retried once on a new socket.
func (n *Reader) generationLocked() (uint32, error) {
	n.gen.NetNS = n.Config.NetNS
	return n.gen.Generation()
}

// Resync drops the cached tables: the next Snapshot reads both again.
func (n *Reader) Resync() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropCache()
	n.behind.Clear()
}

// dropCache forgets the cached tables and their evaluation.
func (n *Reader) dropCache() {
	n.cache = nil
	n.pub.Drop()
}

// Frozen returns a copy of the latest observation that nothing changes,
// made at most once per version; false when nothing is cached (an earlier
// observation is then not changed any more either). It waits for no
// kernel read.
func (n *Reader) Frozen() (model.Observed, bool) { return n.pub.Frozen() }

// Close releases the socket kept for generation queries.
func (n *Reader) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gen.Close()
}

// SetHints hands the reader what the API knows. The cached tables are
// evaluated with them at the next Snapshot; nothing is re-read.
func (n *Reader) SetHints(h model.Hints) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.Config.Hints = h
	n.rehint = true
}

// ApplyChange applies one change event (see Update), keeping the result for
// the next Snapshot.
func (n *Reader) ApplyChange(ctx context.Context, ev nfevents.Event) error {
	_, err := n.Update(ctx, ev)
	return err
}

// cachedLocked returns the cached read, evaluated with the current hints.
func (n *Reader) cachedLocked() model.Observed {
	if n.rehint {
		n.cache.view = newNFTView(n.cache.tables, n.Config.Hints)
		n.pub.Publish(n.cache.view.observed(), nil)
		n.rehint = false
	}
	return n.pub.Current()
}

// nftCache is the last read: the tables (v4, v6; nil when absent) and the
// generation they were read at. Its evaluation is the reader's published
// observation (Reader.pub), whose frontends change in place with an
// endpoint change (Reader's comment); a new Version says so.
type nftCache struct {
	gen    uint32
	tables []*nftTable
	view   *nftView // per-destination evaluation, updated per change
}

var _ interface {
	Snapshot(context.Context) (model.Observed, error)
} = (*Reader)(nil)

// Name returns model.ModeNFTables.
func (n *Reader) Name() string { return model.ModeNFTables }

// Snapshot returns the current state. It re-reads both tables unless the
// generation id is the one of the cached read. A full read spans several
// netlink requests; it is repeated while the generation changes under it.
func (n *Reader) Snapshot(ctx context.Context) (model.Observed, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	obs, err := n.snapshotLocked(ctx)
	if err != nil {
		return obs, err
	}
	return n.pub.Returned(obs), nil
}

func (n *Reader) snapshotLocked(ctx context.Context) (model.Observed, error) {
	if n.cache != nil {
		g, err := n.generationLocked()
		if err != nil {
			return model.Observed{}, err
		}
		if g == n.cache.gen {
			n.behind.Clear()
			if n.audit.due(time.Now()) {
				return n.auditLocked(ctx)
			}
			return n.cachedLocked(), nil
		}
		if n.evented && n.behind.Await(n.Config.BehindLimit) {
			// Only a reader fed events waits for them.
			return n.cachedLocked(), nil
		}
	}
	return n.fullLocked(ctx)
}

// Update applies one change event and returns the new state. When the
// event carries all of its transaction's messages, it patches the cached
// tables from them and reads nothing (live_ops.go); else it re-reads what
// the event names in the kube-proxy tables (everything when events were
// lost or a table was created or deleted).
func (n *Reader) Update(ctx context.Context, ev nfevents.Event) (model.Observed, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.evented = true
	n.behind.Clear()
	if n.cache == nil || ev.Lost || nftTableLevelChange(ev) {
		return n.fullLocked(ctx)
	}
	if !ev.TouchesTable("ip", nftTableName) && !ev.TouchesTable("ip6", nftTableName) {
		n.cache.gen = ev.Generation
		return n.cachedLocked(), nil // e.g. an iptables-nft change: nothing to read
	}
	full := false
	for _, nf := range []string{"ip", "ip6"} {
		full = full || touchesReaderSets(ev.Sets(nf, nftTableName))
	}
	patched, readAll := n.applyOpsLocked(ev)
	if readAll {
		return n.fullLocked(ctx)
	}
	if !patched {
		if err := n.rereadLocked(ctx, ev); err != nil {
			n.dropCache() // partly refreshed: read everything next time
			return model.Observed{}, err
		}
	}
	n.cache.gen = ev.Generation
	if full || n.rehint || n.cache.view == nil {
		// The maps changed (services came or went) or the hints did: every
		// destination may have moved.
		n.cache.view = newNFTView(n.cache.tables, n.Config.Hints)
		n.rehint = false
		return n.pub.Publish(n.cache.view.observed(), nil), nil
	}
	changed := map[model.Frontend]bool{}
	n.pub.Lock() // rechain changes the published frontends in place
	for i, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
		if n.cache.view.tables[i] == nil || !ev.TouchesTable(nftFamilyOf(fam), nftTableName) {
			continue
		}
		for fe := range n.cache.view.rechain(i, ev.Chains(nftFamilyOf(fam), nftTableName)) {
			changed[fe] = true
		}
	}
	if len(changed) > 0 {
		n.pub.PublishLocked(n.cache.view.observed(), changed)
	}
	n.pub.Unlock()
	return n.pub.Current(), nil
}

// rereadLocked re-reads the chains and maps the event names, then the
// chain names when it created or deleted chains.
func (n *Reader) rereadLocked(ctx context.Context, ev nfevents.Event) error {
	err := n.withConn(func(conn *nftables.Conn) error {
		for i, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
			t := n.cache.tables[i]
			nf := nftFamilyOf(fam)
			if t == nil || !ev.TouchesTable(nf, nftTableName) {
				continue
			}
			r := &nftNetlinkReader{conn: conn, table: &nftables.Table{Name: nftTableName, Family: nftTableFamily(fam)}, t: t, reads: &n.kernelReads}
			if err := r.refresh(ctx, ev.Sets(nf, nftTableName), ev.Chains(nf, nftTableName)); err != nil {
				return fmt.Errorf("%s: %w", nftTableLabel(fam), err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
		if t := n.cache.tables[i]; t != nil && chainItems(ev, nftFamilyOf(fam)) {
			if err := n.readNamesLocked(fam, t); err != nil {
				return fmt.Errorf("%s: %w", nftTableLabel(fam), err)
			}
		}
	}
	return nil
}

// touchesReaderSets reports whether a change names a map or set every
// destination depends on (the dispatch maps, cluster-ips).
func touchesReaderSets(sets []string) bool {
	for _, s := range sets {
		if isNFTReaderMap(s) || s == nftSetClusterIPs {
			return true
		}
	}
	return false
}

// nftTableLevelChange reports a kube-proxy table created or deleted.
func nftTableLevelChange(ev nfevents.Event) bool {
	for _, c := range ev.Changes {
		if c.Object == "table" && c.Table == nftTableName && (c.Family == "ip" || c.Family == "ip6") {
			return true
		}
	}
	return false
}

func nftFamilyOf(fam model.IPFamily) string {
	if fam == model.IPv6 {
		return "ip6"
	}
	return "ip"
}

func nftTableFamily(fam model.IPFamily) nftables.TableFamily {
	if fam == model.IPv6 {
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyIPv4
}

func (n *Reader) fullLocked(ctx context.Context) (model.Observed, error) {
	n.dropCache()
	n.behind.Clear()
	n.fullReads++
	tables, gen, stable, err := n.fetch(ctx, n.retries())
	if err != nil {
		return model.Observed{}, err
	}
	view := newNFTView(tables, n.Config.Hints)
	obs := view.observed()
	n.rehint = false
	if stable {
		n.cache = &nftCache{gen: gen, tables: tables, view: view}
		n.audit.asked = false // a stable full read is what an audit asks for
		return n.pub.Publish(obs, nil), nil
	}
	obs.Warnings = append(obs.Warnings, "the ruleset kept changing during the read; it may mix generations")
	return obs, nil
}

// fetchBackoff is the wait before fetch's first retry, doubled for each
// further one up to 8x (10+20+40 ms with the default 3 retries).
const fetchBackoff = 10 * time.Millisecond

// retries is Config.Retries or its default.
func (n *Reader) retries() int {
	if n.Config.Retries <= 0 {
		return 3
	}
	return n.Config.Retries
}

// fetch reads the tables (nil for absent ones), retrying on concurrent
// change up to retries times; it returns the generation of a stable read.
func (n *Reader) fetch(ctx context.Context, retries int) ([]*nftTable, uint32, bool, error) {
	var tables []*nftTable
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			// Not at once: kube-proxy's IPv4 and IPv6 proxiers commit back
			// to back, and immediate retries can all fall inside one burst.
			time.Sleep(min(fetchBackoff<<(attempt-1), 8*fetchBackoff)) // the read checks ctx
		}
		before, err := n.generationLocked()
		if err != nil {
			return nil, 0, false, err
		}
		tables, err = n.read(ctx)
		after, gerr := n.generationLocked()
		if gerr != nil {
			return nil, 0, false, gerr
		}
		switch fetchOutcome(before, after, err, attempt == retries) {
		case fetchStable:
			return tables, after, true, nil
		case fetchMixed:
			return tables, 0, false, nil
		case fetchFailed:
			return nil, 0, false, fetchError(err, retries+1)
		}
	}
	panic("unreachable: the last attempt decides")
}

type fetchResult int

const (
	fetchRetry  fetchResult = iota // try again
	fetchStable                    // one generation throughout: cache it
	fetchMixed                     // complete, but the generation moved on every attempt
	fetchFailed                    // an error, or an incomplete last attempt
)

// fetchOutcome decides one attempt of fetch. An object that vanished during
// the read (ENOENT: a concurrent commit deleted it) is retried like a moved
// generation; on the last attempt it fails the read: what was read is
// incomplete (a table, chain or set is missing from it) and would report
// every rule it lacks as missing.
func fetchOutcome(before, after uint32, err error, last bool) fetchResult {
	switch {
	case err != nil && !nftIsNotFound(err):
		return fetchFailed
	case err == nil && before == after:
		return fetchStable
	case !last:
		return fetchRetry
	case err == nil:
		return fetchMixed
	}
	return fetchFailed
}

func fetchError(err error, attempts int) error {
	if !nftIsNotFound(err) {
		return err
	}
	return fmt.Errorf("the ruleset kept changing: objects vanished during each of %d reads, last %w; the next read tries again", attempts, err)
}

func (n *Reader) withConn(fn func(*nftables.Conn) error) error {
	return WithConn(n.Config.NetNS, fn)
}

func (n *Reader) read(ctx context.Context) ([]*nftTable, error) {
	var out []*nftTable
	err := n.withConn(func(conn *nftables.Conn) error {
		for _, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
			t, err := nftReadNetlink(ctx, conn, fam, &n.kernelReads)
			if err == nil && t != nil {
				err = n.readNamesLocked(fam, t)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", nftTableLabel(fam), err)
			}
			out = append(out, t)
		}
		return nil
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	return out, err
}
