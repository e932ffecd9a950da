package iptables

// NFTReader reads the nf_tables tables iptables-nft writes (ip nat,
// ip filter, ip6 nat, ip6 filter) over netlink, in process: no
// iptables-save. Each rule is decoded (netlink_decode.go) into the
// arguments iptables-nft-save would print and parsed by the same rule
// parser as a dump, into the same tables the walker reads (walk.go, nat.go,
// filter.go), so the observed state is the one Parse gives for the
// iptables-nft-save text of the same tables, evidence included.
//
// The tables are kept between reads: ApplyEvent patches the chains an
// nf_tables change event describes with its rule messages (netlink_ops.go)
// and re-reads only the other chains it names. A rule the decoder does not understand
// is never skipped: in a KUBE-* chain it fails the read (ErrUndecodable;
// the caller falls back to iptables-save), elsewhere it marks its chain,
// and the read fails if the walk reaches that chain.
//
// Netlink: a blocking socket of its own (nlconn.go) and attributes walked
// in place (nlattr.go, netlink_expr.go); github.com/mdlayher/netlink only
// encodes some requests, github.com/google/nftables/expr gives the
// expression types. Not nftables.Conn.GetRules: it drops expressions it
// does not know without a trace (which would skip a match silently: a
// wrong answer) and has no whole-table rule dump.
//
// It only reads: GETGEN, GETCHAIN and GETRULE requests, never NEW/DEL.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
)

// ErrUndecodable wraps a rule the netlink reader cannot decode faithfully.
var ErrUndecodable = errors.New("iptables-nft rule not decodable")

// NFTStats counts the reader's work.
type NFTStats struct {
	FullReads   int           // whole-table reads
	ReadRetries int           // read attempts dropped (full reads, re-reads for events): a commit landed during them
	ChainReads  int           // single chains re-read for change events
	LastChains  int           // chains re-read by the last ApplyChanges
	Rules       int           // rules kept by the last full read (KUBE-MARK-MASQ jumps are not)
	LastReadDur time.Duration // wall time of the last full read
	Walks       int           // full walks of the cached tables (every frontend resolved)
	LastGroups  int           // frontend groups the last ApplyChanges re-resolved (view.go)
	LastChanged int           // frontends the last ApplyChanges named changed

	PatchedChains  int // chains patched from rule messages (netlink_ops.go)
	LastPatched    int // ... by the last ApplyEvent
	LastSame       int // ... of which came out with the same rules (not walked again)
	LastDecoded    int // rules the last ApplyEvent decoded from messages
	PatchFallbacks int // chains (or tables) read again: the messages did not tell
	Audits         int // audit reads (full reads after patching, AuditEvery)
	AuditsDeferred int // audit reads given up to commits (every attempt interrupted): the patched tables kept, the audit tried again later
	AuditDiffs     int // audit reads that found the patched tables differed from the kernel's
	Dials          int // nfnetlink sockets opened (one per reader unless an operation failed)
}

// NFTReader is the in-process iptables-nft reader.
type NFTReader struct {
	NetNS string
	IPv6  bool

	mu    sync.Mutex
	fams  []*nlFamily // nil: nothing cached
	gen   uint32      // nf_tables generation the cache reflects
	stats NFTStats

	hints model.Hints          // the walk's
	pub   nfevents.Observation // the walk of the cached tables (Version, Since, Changed, Frozen)
	// behind is the wait, once a Snapshot found the kernel's generation
	// ahead of the cache, for the events that bring it up to date
	// (nfevents.Behind): a read between two transactions of one sync must
	// wait for the next event, not re-read the whole table.
	behind nfevents.Behind
	// BehindLimit bounds how long the cache may trail the kernel's generation
	// (default nfevents.DefaultBehindLimit): events that never arrive cost
	// at most that.
	BehindLimit time.Duration
	// AuditEvery: once chains were patched from rule messages, a Snapshot
	// this long after the last full read reads everything again and
	// compares (Stats.AuditDiffs). Default 10 minutes; negative: never.
	AuditEvery time.Duration
	patched    bool      // chains were patched since the last full read
	lastFull   time.Time // when the last full read ended
	// auditBackoff: when an audit put off by commits is tried again
	auditBackoff nfevents.AuditBackoff
	auditNow     bool // RequestAudit: the next Snapshot audits
	// opsIdx backs the per-chain op index lists of one event
	// (opsByChain), used again by the next event.
	opsIdx []int32
	// patchBuf is the chain patch of patchChain, used again chain after
	// chain: an iptables-nft sync patches KUBE-SERVICES whole (a node and
	// handle per rule), which as a fresh patch per sync would be megabytes
	// of garbage in a large cluster.
	patchBuf chainPatch
	conn     *nlConn // kept between operations (withConn); nil: open on use
}

// nlFamily holds one family's nat and filter tables.
type nlFamily struct {
	v6     bool
	fam    model.IPFamily
	tag    string
	tables ipDump
	// opaque: chains (not KUBE-*) holding rules that were not decoded, and why.
	opaque map[string]map[string]string // table -> chain -> reason
	view   *ipView                      // the walk, per frontend; nil: walk again
}

var nlTables = []string{"nat", "filter"}

// NFTTables are the nf_tables tables iptables-nft writes for kube-proxy:
// those whose rule and chain messages the change feed is to carry for this
// reader (nfevents.Options.OpTables).
var NFTTables = []nfevents.TableRef{{Family: "ip", Table: "nat"}, {Family: "ip", Table: "filter"},
	{Family: "ip6", Table: "nat"}, {Family: "ip6", Table: "filter"}}

// Stats returns the reader's counters.
func (n *NFTReader) Stats() NFTStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Drop forgets the cached tables: the next Snapshot reads everything.
func (n *NFTReader) Drop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fams = nil
	n.pub.Drop()
}

// Snapshot returns the observed state. It reads everything when nothing is
// cached or the nf_tables generation moved past what the cache reflects
// (a change not delivered through ApplyChanges), else returns the walk of
// the cache, which ApplyChanges keeps current.
//
// The result's Frontends are shared with the cache and changed in place
// by the next ApplyEvent (take Frozen to keep or hand on an observation;
// never change it). Its Version changes only when its content may; after
// change events it names,
// in Since and Changed, the only frontends that differ from the state the
// previous Snapshot returned. Hints are compared by identity: pass a new
// Hints value when they change (the whole table is walked again).
func (n *NFTReader) Snapshot(ctx context.Context, hints model.Hints) (model.Observed, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	err := n.withConn(func(c *nlConn) error {
		var prev []*nlFamily
		if n.fams != nil {
			gen, err := getGen(c)
			if err != nil {
				return err
			}
			if gen == n.gen && !n.auditDue() {
				n.behind.Clear()
				return nil
			}
			if gen != n.gen && n.behind.Await(n.BehindLimit) {
				return nil // the change events of this generation are on their way
			}
			if gen == n.gen {
				prev = n.fams // an audit: compare after the read
			}
		}
		n.behind.Clear()
		gen := n.gen
		if prev == nil {
			// Not an audit: the cached tables are not needed during the
			// read (kept, they would double the heap while it runs).
			n.fams = nil
			n.pub.Drop()
		}
		if err := n.fullRead(ctx, c); err != nil {
			if prev != nil && Transient(err) {
				n.deferAudit(prev)
				return nil
			}
			return err
		}
		if prev != nil {
			n.audited(prev, gen)
		}
		return nil
	})
	if err != nil {
		n.fams = nil
		n.pub.Drop()
		return model.Observed{}, err
	}
	if n.pub.Current().Version == 0 || !sameHints(hints, n.hints) {
		n.hints = hints
		if err := n.walkAll(); err != nil {
			return model.Observed{}, err
		}
	}
	return n.pub.Returned(n.pub.Current()), nil
}

// sameHints reports whether two Hints are the same value (same slice and
// map), not a deep comparison.
func sameHints(a, b model.Hints) bool {
	if len(a.ServicePorts) != len(b.ServicePorts) || len(a.Frontends) != len(b.Frontends) {
		return false
	}
	if len(a.ServicePorts) > 0 && &a.ServicePorts[0] != &b.ServicePorts[0] {
		return false
	}
	return reflect.ValueOf(a.Frontends).UnsafePointer() == reflect.ValueOf(b.Frontends).UnsafePointer()
}

// ApplyChanges is ApplyEvent for an event that carries no rule messages.
func (n *NFTReader) ApplyChanges(ctx context.Context, gen uint32, lost bool, changes []nfevents.Change) error {
	return n.ApplyEvent(ctx, nfevents.Event{Generation: gen, Lost: lost, Changes: changes})
}

// ApplyEvent brings the cached tables up to a committed transaction
// (generation ev.Generation): a chain whose change the event's rule messages
// describe is patched from them (netlink_ops.go), any other chain it names
// in the tables this reader keeps is read again; then only the frontends
// whose verdict depends on the chains that changed are resolved again
// (view.go). The next Snapshot returns the result. ev.Lost: events were
// dropped, so the cache is dropped. An error drops the cache too.
func (n *NFTReader) ApplyEvent(ctx context.Context, ev nfevents.Event) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stats.LastChains, n.stats.LastPatched, n.stats.LastSame, n.stats.LastDecoded = 0, 0, 0, 0
	if n.fams == nil {
		return nil // the next Snapshot reads everything
	}
	if ev.Lost {
		n.fams = nil
		n.pub.Drop()
		return nil
	}
	chains, whole := n.namedChains(ev.Changes)
	n.patch(ev, chains, whole)
	err := n.reread(ctx, chains, whole)
	if err != nil {
		n.fams = nil
		n.pub.Drop()
		return err
	}
	if int32(ev.Generation-n.gen) > 0 {
		n.gen = ev.Generation
		n.behind.Clear()
	}
	if n.pub.Current().Version == 0 {
		return nil // not walked yet: the next Snapshot walks
	}
	names := func(f *nlFamily, table string) []string {
		var out []string
		for name := range chains[tableKey{f, table}] {
			out = append(out, name)
		}
		return out
	}
	if err := n.rewalk(func(f *nlFamily) ([]string, []string) { return names(f, "nat"), names(f, "filter") }); err != nil {
		n.fams = nil
		n.pub.Drop()
		return err
	}
	return nil
}

// rewalk brings the walk up to date after chains were re-read: per family,
// the nat and filter chains that changed. Only the frontends that depend on
// them are resolved again (ipView.update), unless a family needs a full walk.
func (n *NFTReader) rewalk(changed func(*nlFamily) (nat, filter []string)) error {
	n.stats.LastGroups, n.stats.LastChanged = 0, 0
	var deltas []ipDelta
	for _, f := range n.fams {
		if f.view == nil {
			return n.walkAll()
		}
		nat, filter := changed(f)
		if len(nat)+len(filter) == 0 {
			continue
		}
		if len(f.opaque["nat"]) > 0 {
			return n.walkAll() // the walk must tell whether it reaches them
		}
		e0 := f.view.evals
		d, ok := f.view.update(nat, filter)
		n.stats.LastGroups += f.view.evals - e0
		if !ok {
			f.view = nil
			return n.walkAll()
		}
		deltas = append(deltas, d)
	}
	changedFronts := map[model.Frontend]bool{}
	warnings := false
	for _, d := range deltas {
		for _, f := range d.gone {
			changedFronts[f] = true
		}
		for _, fv := range d.set {
			changedFronts[fv.f] = true
		}
		warnings = warnings || d.warnings
	}
	if len(changedFronts) == 0 && !warnings {
		return nil // same state, same version
	}
	// In place (Frozen gives a copy to whatever keeps one): a copy of every
	// frontend per change would make its cost grow with the cluster.
	cur := n.pub.Current()
	obs := model.Observed{Datapath: model.ModeIPTables, Frontends: cur.Frontends, Warnings: cur.Warnings}
	n.pub.Lock()
	defer n.pub.Unlock()
	for _, d := range deltas {
		for _, f := range d.gone {
			delete(obs.Frontends, f)
		}
		for _, fv := range d.set {
			obs.Frontends[fv.f] = fv.v
		}
	}
	if warnings {
		obs.Warnings = nil
		for _, f := range n.fams {
			obs.Warnings = append(obs.Warnings, f.view.warnings...)
		}
		obs.Warnings = slices.Clip(obs.Warnings)
	}
	n.stats.LastChanged = len(changedFronts)
	n.pub.PublishLocked(obs, changedFronts)
	return nil
}

// walkAll walks every family's cached tables.
func (n *NFTReader) walkAll() error {
	obs := model.Observed{Datapath: model.ModeIPTables, Frontends: map[model.Frontend]model.Verdict{}}
	idx := newParseIndex(n.hints)
	n.stats.Walks++
	for _, f := range n.fams {
		f.view = newIPView(f.fam, f.tag, f.tables, idx, nil)
		for chain, why := range f.opaque["nat"] {
			if c := f.view.nat.chains[chain]; c != nil && c.done {
				n.fams = nil
				n.pub.Drop()
				return fmt.Errorf("%w: %s nat chain %s, reached from kube-proxy's chains: %s", ErrUndecodable, f.fam, chain, why)
			}
		}
		f.view.frontends(obs.Frontends)
		obs.Warnings = append(obs.Warnings, f.view.warnings...)
	}
	obs.Warnings = slices.Clip(obs.Warnings)
	n.pub.Publish(obs, nil)
	return nil
}

// Frozen returns a copy of the latest observation that nothing changes,
// made at most once per version; false when nothing is cached (an earlier
// observation is then not changed any more either). It waits for no
// kernel read: only for a change of the observation itself.
func (n *NFTReader) Frozen() (model.Observed, bool) { return n.pub.Frozen() }

func (n *NFTReader) family(name string) *nlFamily {
	for _, f := range n.fams {
		if name == "ip" && !f.v6 || name == "ip6" && f.v6 {
			return f
		}
	}
	return nil
}

// nlRecvBuffer is the receive buffer (nlconn.go): the largest datagram a
// dump fills. The kernel sizes a dump's next datagram by the largest
// buffer recvmsg was given, up to 32 KiB less its overhead; a peek for the
// size and an exact-size read (the netlink library's way) keeps it at the
// 4 KiB it starts with, and every datagram of a dump is one more
// resumption, which for chain listings walks again from the first chain.
const nlRecvBuffer = 32 << 10

// withConn runs one operation on the reader's nfnetlink socket, opened in
// the namespace on first use and kept: closing a NETLINK_NETFILTER socket
// makes nf_tables look for tables the socket owned, under the same mutex a
// commit holds, so a close while iptables-nft-restore's batch is in the
// kernel waits until that batch commits, once per poll (see BENCHMARKS.md,
// "Live: the agent beside kube-proxy (issue 16)"). The socket is dropped after an
// error other than a commit's interruption (Transient: the answer was read
// to its end) and opened again on the next operation; answers left half
// read are skipped by sequence number anyway (nlConn.datagram).
func (n *NFTReader) withConn(fn func(*nlConn) error) error {
	if n.conn == nil {
		c, err := dialNFT(n.NetNS)
		if err != nil {
			return err
		}
		n.conn = c
		n.stats.Dials++
	}
	err := fn(n.conn)
	if err != nil && !Transient(err) {
		_ = n.conn.Close()
		n.conn = nil
	}
	return err
}

// Close releases the reader's nfnetlink socket; the next read opens one
// again. A reader dropped without Close has its socket closed when it is
// garbage collected.
func (n *NFTReader) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		return nil
	}
	err := n.conn.Close()
	n.conn = nil
	return err
}

// fullReadAttempts bounds the attempts of a full read; between two, the
// reader waits fullReadBackoff, doubled each time (10+20+40+80 ms): a
// kube-proxy sync commits several tables back to back (filter, nat, and
// ip6's), and immediate retries can all fall inside one such burst
// (TestNFTReaderFullReadDuringCommits).
const (
	fullReadAttempts = 5
	fullReadBackoff  = 10 * time.Millisecond
)

// fullRead reads every table. A commit during the read (the generation
// moved, or a dump says it was interrupted) makes it read again, a few
// times; after that the older generation is kept, so the next Snapshot
// reads again unless events catch up. An attempt that is read again is
// dropped first: two copies of the tables are never kept at once.
func (n *NFTReader) fullRead(ctx context.Context, c *nlConn) error {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		last := attempt == fullReadAttempts-1
		if attempt > 0 {
			time.Sleep(fullReadBackoff << (attempt - 1)) // the read checks ctx
		}
		before, err := getGen(c)
		if err != nil {
			return err
		}
		fams, rules, err := n.readFamilies(ctx, c)
		if errors.Is(err, errDumpInterrupted) && !last {
			n.stats.ReadRetries++
			continue
		}
		if err != nil {
			return err
		}
		after, err := getGen(c)
		if err != nil {
			return err
		}
		n.stats.FullReads++
		if after != before && !last {
			n.stats.ReadRetries++
			continue
		}
		n.fams, n.gen = fams, before
		n.pub.Drop()
		n.patched, n.lastFull, n.auditNow = false, time.Now(), false
		n.stats.Rules = rules
		n.stats.LastReadDur = time.Since(start)
		return nil
	}
}

// readFamilies reads the nat and filter tables of each family.
func (n *NFTReader) readFamilies(ctx context.Context, c *nlConn) ([]*nlFamily, int, error) {
	var fams []*nlFamily
	rules := 0
	for _, v6 := range []bool{false, true} {
		if v6 && !n.IPv6 {
			continue
		}
		f := &nlFamily{v6: v6, fam: model.IPv4, tables: ipDump{}, opaque: map[string]map[string]string{}}
		if v6 {
			f.fam, f.tag = model.IPv6, "ip6 "
		}
		// One chain listing for both tables: the kernel cannot filter it
		// by table, and each listing is quadratic in the family's chains
		// (see listFamilyChains).
		lists, err := listFamilyChains(c, v6)
		if err != nil {
			return nil, 0, err
		}
		for _, t := range nlTables {
			if err := n.readListedTable(ctx, c, f, t, lists[t]); err != nil {
				return nil, 0, err
			}
			for _, ch := range f.tables[t].chains {
				rules += len(ch.rules)
			}
		}
		fams = append(fams, f)
	}
	return fams, rules, nil
}

// readTable (re)reads one table: its chains, then each chain's rules.
func (n *NFTReader) readTable(ctx context.Context, c *nlConn, f *nlFamily, table string) error {
	lists, err := listFamilyChains(c, f.v6)
	if err != nil {
		return err
	}
	return n.readListedTable(ctx, c, f, table, lists[table])
}

// readListedTable reads the rules of a table's listed chains (nil: the
// table does not exist).
func (n *NFTReader) readListedTable(ctx context.Context, c *nlConn, f *nlFamily, table string, list *chainList) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	delete(f.opaque, table)
	if list == nil {
		// iptables-nft-save prints a missing table as an empty one (its
		// built-in chains): the same, for the walker.
		f.tables[table] = &ipTable{name: table, chains: map[string]*ipChain{}}
		return nil
	}
	// The table keeps no order list (ipTable.order): it is patched chain
	// by chain, and the list would keep every chain replaced since, with
	// its rules, alive.
	t := &ipTable{name: table, chains: make(map[string]*ipChain, len(list.names))}
	order := make([]*ipChain, 0, len(list.names))
	for i, name := range list.names {
		ch := &ipChain{name: name, handle: list.handles[i]}
		t.chains[name] = ch
		order = append(order, ch)
	}
	// One dump per chain, not one for the table: the kernel resumes a dump
	// by walking again from the first rule of its scope up to where the
	// last message buffer ended, so a whole-table dump is quadratic in the
	// table's rules (minutes of kernel CPU in a large cluster; see
	// BENCHMARKS.md, "iptables-nft netlink reader: the start-up full read
	// (2026-12-02)"); per chain it is quadratic only in the longest chain
	// (KUBE-SERVICES).
	var err error
	for _, ch := range order {
		err = dumpRules(c, f.v6, table, ch.name, func(r nlRule, derr error) error {
			if derr != nil {
				return f.undecodable(table, r.chain, derr)
			}
			if r.chain != ch.name {
				return fmt.Errorf("nf_tables %s %s: rule of chain %q in the dump of %q", f.fam, table, r.chain, ch.name)
			}
			// Each rule on its own, not from a shared block: the
			// table is patched for as long as the agent runs, and a
			// block would stay alive as long as any one of its rules
			// does (a service's chains outlive its endpoints' chains).
			return t.addNLRule(ch, r, false)
		})
		if errors.Is(err, unix.ENOENT) {
			continue // deleted since it was listed: the generation check reads again
		}
		if err != nil {
			return err
		}
	}
	f.tables[table] = t
	return nil
}

// readChain re-reads one chain (deleted when the kernel does not have it any more).
func (n *NFTReader) readChain(ctx context.Context, c *nlConn, f *nlFamily, table, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := f.tables[table]
	if t == nil {
		return n.readTable(ctx, c, f, table)
	}
	ok, handle, err := chainExists(c, f.v6, table, name)
	if err != nil {
		return err
	}
	if m := f.opaque[table]; m != nil {
		delete(m, name)
	}
	if !ok {
		t.dropChain(name)
		return nil
	}
	ch := &ipChain{name: name, handle: handle}
	err = dumpRules(c, f.v6, table, name, func(r nlRule, derr error) error {
		if derr != nil {
			return f.undecodable(table, name, derr)
		}
		if r.chain != name {
			return fmt.Errorf("nf_tables %s %s: dump of chain %s returned a rule of %s", f.fam, table, name, r.chain)
		}
		return t.addNLRule(ch, r, false)
	})
	if err != nil {
		return err
	}
	t.setChain(ch)
	return nil
}

// undecodable decides what a rule the decoder refused means: fatal in a
// KUBE-* chain (every one of them can be read by the walker), recorded for
// any other chain (fatal only if the walk reaches it).
func (f *nlFamily) undecodable(table, chain string, err error) error {
	var ue *undecodableError
	if !errors.As(err, &ue) {
		return err
	}
	if strings.HasPrefix(chain, "KUBE-") {
		return fmt.Errorf("%w: %s %s %v", ErrUndecodable, f.fam, table, err)
	}
	if f.opaque[table] == nil {
		f.opaque[table] = map[string]string{}
	}
	if _, seen := f.opaque[table][chain]; !seen {
		f.opaque[table][chain] = err.Error()
	}
	return nil
}

// addNLRule parses a decoded rule into the chain, as a dump line would be.
func (t *ipTable) addNLRule(c *ipChain, r nlRule, slab bool) error {
	line := r.line
	if line == "" {
		line = "-A " + r.chain
		if r.args != "" {
			line += " " + r.args
		}
	}
	ir, err := t.parseNLRule(c.name, line, slab)
	if err != nil {
		return err
	}
	if r.handle != 0 {
		c.nl = append(c.nl, nlSlot{handle: r.handle, key: r.key, rule: ir})
	}
	if ir != nil {
		c.rules = append(c.rules, ir)
	}
	return nil
}

// parseNLRule parses a rendered rule line; nil for a rule dumps skip.
func (t *ipTable) parseNLRule(chain, line string, slab bool) (*ipRule, error) {
	if isMarkMasqLine(line) {
		return nil, nil // as parseDumpLine: never parsed (see skipMarkRule)
	}
	toks, err := tokenize(line, t.toks[:0])
	t.toks = toks[:0] // reused: parseRule keeps no slice of it
	if err != nil {
		return nil, fmt.Errorf("rendered rule %q: %w", line, err)
	}
	var ir *ipRule
	if slab {
		ir = t.newRule()
	} else {
		ir = new(ipRule) // netlink tables: no shared block kept alive by one rule
	}
	if err := parseRule(ir, chain, toks[2:], line); err != nil {
		return nil, fmt.Errorf("rendered rule %q: %w", line, err)
	}
	return ir, nil
}

// isMarkMasqLine is skipMarkRule's test: such rules are dropped unparsed
// from dumps, so they must be dropped here too (a comment on one would
// otherwise name the service of its chain).
func isMarkMasqLine(line string) bool {
	return strings.HasPrefix(line, "-A ") && strings.HasSuffix(line, " -j KUBE-MARK-MASQ") &&
		strings.IndexByte(line, '\\') < 0 && strings.Count(line, `"`)%2 == 0
}

// --- netlink requests (reads only) ---

const (
	nfnlSubsysNFTables = 10
	nftMsgNewChain     = unix.NFT_MSG_NEWCHAIN
	nftMsgGetChain     = unix.NFT_MSG_GETCHAIN
	nftMsgNewRule      = unix.NFT_MSG_NEWRULE
	nftMsgGetRule      = unix.NFT_MSG_GETRULE
	nftMsgNewGen       = unix.NFT_MSG_NEWGEN
	nftMsgGetGen       = unix.NFT_MSG_GETGEN
	nftaChainTable     = 1
	nftaChainName      = 3
	nftaChainHandle    = 2
	nftaGenID          = 1
)

func nfgen(v6 bool) []byte {
	fam := byte(unix.NFPROTO_IPV4)
	if v6 {
		fam = unix.NFPROTO_IPV6
	}
	return []byte{fam, 0 /* NFNETLINK_V0 */, 0, 0}
}

func request(msg uint16, dump bool, v6 bool, attrs ...netlink.Attribute) (nlReq, error) {
	data, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return nlReq{}, err
	}
	flags := uint16(unix.NLM_F_REQUEST)
	if dump {
		flags |= unix.NLM_F_DUMP
	}
	return nlReq{typ: nfnlSubsysNFTables<<8 | msg, flags: flags, data: append(nfgen(v6), data...)}, nil
}

func cstr(s string) []byte { return append([]byte(s), 0) }

// getGen asks for the ruleset generation.
func getGen(c *nlConn) (uint32, error) {
	req, _ := request(nftMsgGetGen, false, false)
	req.data[0] = unix.AF_UNSPEC
	var gen uint32
	found := false
	err := c.execute(req, func(typ uint16, data []byte) error {
		if typ&0xff != nftMsgNewGen || len(data) < 4 || found {
			return nil
		}
		ad, err := newAttrs(data[4:])
		if err != nil {
			return err
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == nftaGenID {
				gen, found = ad.Uint32(), true
			}
		}
		return ad.Err()
	})
	if err != nil {
		return 0, fmt.Errorf("nf_tables getgen: %w", err)
	}
	if !found {
		return 0, errors.New("nf_tables getgen: no generation in the reply")
	}
	return gen, nil
}

// errDumpInterrupted: a commit happened during a dump.
var errDumpInterrupted = errors.New("nf_tables dump interrupted by a commit")

// Transient reports a read that failed only because kube-proxy committed
// during it (a dump interrupted, a chain gone between listing and reading
// it): reading again once the commits pause succeeds.
func Transient(err error) bool {
	return errors.Is(err, errDumpInterrupted) || errors.Is(err, unix.ENOENT)
}

// dump runs a dump request and hands each message's attributes to fn (a
// slice of the receive buffer, valid only during the call).
// An interrupted dump (a commit during it) is an error: the caller re-reads.
func dump(c *nlConn, req nlReq, want uint16, fn func([]byte) error) error {
	seq, err := c.send(req)
	if err != nil {
		return err
	}
	return c.receive(seq, true, func(typ, flags uint16, data []byte) error {
		if flags&unix.NLM_F_DUMP_INTR != 0 {
			return errDumpInterrupted
		}
		if typ&0xff != want || len(data) < 4 {
			return nil
		}
		return fn(data[4:])
	})
}

// chainList is the chains of one table, in the kernel's order.
type chainList struct {
	names   []string
	handles []uint64
}

// listChains returns the chain names of a table and their handles, nil if
// it does not exist.
func listChains(c *nlConn, v6 bool, table string) ([]string, []uint64, error) {
	lists, err := listFamilyChains(c, v6)
	if err != nil || lists[table] == nil {
		return nil, nil, err
	}
	return lists[table].names, lists[table].handles, nil
}

// listFamilyChains lists the chains of every table of a family, by table.
// The kernel has no table filter for this dump, and it resumes it by
// walking its chain list again from the first chain of the first table
// up to where the last message buffer ended: the listing is quadratic in
// the family's chains, about n^2/2/k chain visits for k chains a buffer.
// A 32 KiB datagram (nlRecvBuffer) holds some hundreds of chains, eight
// times what the 4 KiB datagrams the kernel starts with hold, so the
// listing makes an eighth of the visits (see BENCHMARKS.md, "iptables-nft
// netlink reader: the start-up full read (2026-12-02)").
func listFamilyChains(c *nlConn, v6 bool) (map[string]*chainList, error) {
	req, err := request(nftMsgGetChain, true, v6)
	if err != nil {
		return nil, err
	}
	lists := map[string]*chainList{}
	err = dump(c, req, nftMsgNewChain, func(b []byte) error {
		ad, err := newAttrs(b)
		if err != nil {
			return err
		}
		t, name, h := chainAttrs(&ad)
		l := lists[t]
		if l == nil {
			l = &chainList{}
			lists[t] = l
		}
		l.names = append(l.names, name)
		l.handles = append(l.handles, h)
		return ad.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("nf_tables list chains: %w", err)
	}
	return lists, nil
}

// chainAttrs reads a chain message's table, name and handle.
func chainAttrs(ad *nlAttrs) (table, name string, handle uint64) {
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case nftaChainTable:
			table = ad.String()
		case nftaChainName:
			name = ad.String()
		case nftaChainHandle:
			handle = ad.Uint64()
		}
	}
	return table, name, handle
}

// chainExists asks for one chain; it returns the chain's handle too.
func chainExists(c *nlConn, v6 bool, table, chain string) (bool, uint64, error) {
	req, err := request(nftMsgGetChain, false, v6,
		netlink.Attribute{Type: nftaChainTable, Data: cstr(table)},
		netlink.Attribute{Type: nftaChainName, Data: cstr(chain)})
	if err != nil {
		return false, 0, err
	}
	var handle uint64
	err = c.execute(req, func(typ uint16, data []byte) error {
		if typ&0xff != nftMsgNewChain || len(data) < 4 {
			return nil
		}
		if ad, err := newAttrs(data[4:]); err == nil {
			_, _, handle = chainAttrs(&ad)
		}
		return nil
	})
	if errors.Is(err, unix.ENOENT) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("nf_tables get chain %s %s: %w", table, chain, err)
	}
	return true, handle, nil
}

// dumpRules dumps the rules of a table (chain "" = all chains) and hands
// each decoded rule, or the decode error, to fn in kernel order.
func dumpRules(c *nlConn, v6 bool, table, chain string, fn func(nlRule, error) error) error {
	req := nlReq{typ: nfnlSubsysNFTables<<8 | nftMsgGetRule, flags: unix.NLM_F_REQUEST | unix.NLM_F_DUMP}
	req.data = appendStrAttr(append(c.reqBuf[:0], nfgen(v6)...), nftaRuleTable, table)
	if chain != "" {
		req.data = appendStrAttr(req.data, nftaRuleChain, chain)
	}
	c.reqBuf = req.data
	err := dump(c, req, nftMsgNewRule, func(b []byte) error {
		r, derr := decodeRuleIn(v6, b, chain)
		var ue *undecodableError
		if derr != nil && !errors.As(derr, &ue) {
			return derr
		}
		return fn(r, derr)
	})
	if err != nil {
		if chain != "" {
			table += " chain " + chain
		}
		return fmt.Errorf("nf_tables rules of table %s: %w", table, err)
	}
	return nil
}
