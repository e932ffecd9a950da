//go:build linux

package iptables

// LegacyReader reads the iptables-legacy tables (ip_tables / ip6_tables:
// nat and filter) in process, through the getsockopt interface
// iptables-legacy-save itself uses (legacy_sockopt.go), instead of forking
// iptables-legacy-save and parsing its text. Each rule is rendered as
// iptables-legacy-save prints it (legacy_decode.go) and parsed by the same
// rule parser as a dump, into the same tables the walker reads, so the
// observed state is the one Parse gives for the iptables-legacy-save text
// of the same tables, evidence included.
//
// Change detection: the kernel keeps no generation for legacy tables, and
// IPT_SO_GET_INFO's num_entries and size can stay the same across a change
// (an endpoint replaced by another), so they only prove a change, never the
// absence of one. Each read copies every table (GET_ENTRIES, what
// iptables-save pays in the kernel too), zeroes the packet counters and
// compares the SHA-256 of those bytes with the previous read's: equal bytes
// decode to equal rules (the decode is a pure function of them), so an
// unchanged table is neither decoded nor walked again. A digest rather than a
// second copy of each table: a large cluster's table is a hundred
// megabytes or more, and a SHA-256 collision between two rule sets is not a practical risk.
//
// A rule the decoder does not know is never skipped silently: in a KUBE-*
// chain it fails the read (ErrLegacyUndecodable; the caller falls back to
// iptables-legacy-save), elsewhere it marks its chain, and the read fails if
// the walk reaches that chain (as NFTReader does).
//
// It only reads: GET_INFO and GET_ENTRIES, never a SET_* option, and it
// never instantiates a table the namespace does not have (the tables
// present are read from /proc/net/ip{,6}_tables_names first).

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
)

// ErrLegacyUndecodable wraps a table or rule the in-process legacy reader
// cannot decode faithfully (the caller reads with iptables-legacy-save).
var ErrLegacyUndecodable = errors.New("iptables-legacy table not decodable in process")

// LegacyStats counts the reader's work.
type LegacyStats struct {
	Reads       int           // Snapshot calls that read the kernel
	Decodes     int           // tables decoded (changed or first seen)
	Copies      int           // tables copied from the kernel (GET_ENTRIES)
	Unchanged   int           // reads where every table was byte-identical to the last
	Walks       int           // walks of the decoded tables into model.Observed
	Bytes       int           // size of the tables read by the last read
	KubeChains  int           // KUBE-* chains in the legacy nat tables (0: kube-proxy is not on legacy)
	LastReadDur time.Duration // wall time of the last read
}

// LegacyReader is the in-process iptables-legacy reader.
type LegacyReader struct {
	NetNS string
	IPv6  bool

	mu       sync.Mutex
	fams     []*legacyFamily
	obs      model.Observed
	haveObs  bool
	hintsGen uint64 // of the hints obs was walked with
	stats    LegacyStats
}

// readNeed says what a read copies from the kernel and what it decodes.
type readNeed int

const (
	// needChanged copies every table and decodes those whose bytes changed.
	needChanged readNeed = iota
	// needAll copies every table and decodes the changed ones and those
	// dropped after the last walk: the read walks whatever changed (no
	// observation yet, or new hints).
	needAll
	// needMissing copies and decodes only the tables dropped after the last
	// walk (the second read of a Snapshot; copying and hashing the changed
	// nat table again would cost as much as its first read).
	needMissing
)

// legacyFamily holds one family's tables as last read.
type legacyFamily struct {
	v6     bool
	fam    model.IPFamily
	tag    string
	tables map[string]*legacyTable // nat, filter; none when the family has no legacy nat table
}

// legacyTable is one table as last read: the blob (counters zeroed) and
// its decoded form.
type legacyTable struct {
	info   tableInfo
	sum    [sha256.Size]byte // of the decoded read's entries (counters zeroed)
	read   bool              // sum is set: the table was read and decoded
	kube   int               // its KUBE-* chains
	table  *ipTable          // nil once walked (dropTables): decoded again when needed
	opaque map[string]string // chain (not KUBE-*) -> why a rule of it was not decoded
}

// Stats returns the reader's counters.
func (l *LegacyReader) Stats() LegacyStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Snapshot reads the tables and returns the observed state. fresh is false
// when every table was byte-identical to the last read and the hints are
// the same (hintsGen: the caller's count of SetHints): obs is then the last
// observation, unchanged. kube is the number of KUBE-* chains in the legacy
// nat tables (0: kube-proxy does not use the legacy backend).
func (l *LegacyReader) Snapshot(ctx context.Context, hints model.Hints, hintsGen uint64) (obs model.Observed, fresh bool, kube int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := time.Now()
	// The decoded tables are dropped after each walk: only a new walk of
	// unchanged bytes (the hints changed) decodes them again.
	need := needChanged
	if !l.haveObs || hintsGen != l.hintsGen {
		need = needAll
	}
	changed, err := l.read(ctx, need)
	if err == nil && changed && l.missingTables() {
		// A walk needs every table: decode the unchanged ones dropped after
		// the last walk (nat changes on every sync of kube-proxy's, filter
		// far less often; it is the small one).
		_, err = l.read(ctx, needMissing)
	}
	l.stats.Reads++
	l.stats.LastReadDur = time.Since(start)
	if err != nil {
		l.fams, l.haveObs = nil, false
		return model.Observed{}, false, 0, err
	}
	kube = 0
	for _, f := range l.fams {
		if t := f.tables["nat"]; t != nil {
			kube += t.kube
		}
	}
	l.stats.KubeChains = kube
	if !changed && l.haveObs && hintsGen == l.hintsGen {
		l.stats.Unchanged++
		return l.obs, false, kube, nil
	}
	obs, err = l.walk(hints)
	l.dropTables()
	if err != nil {
		l.haveObs = false
		return model.Observed{}, false, kube, err
	}
	l.obs, l.haveObs, l.hintsGen = obs, true, hintsGen
	return obs, true, kube, nil
}

// missingTables reports whether a table read is not decoded (dropped).
func (l *LegacyReader) missingTables() bool {
	for _, f := range l.fams {
		for _, t := range f.tables {
			if t.table == nil {
				return true
			}
		}
	}
	return false
}

// dropTables lets the decoded tables go once walked: what a read compares
// is the digest of the bytes, and what Snapshot returns is the walk's
// observation. Kept, the decoded rules of a large cluster (a hundred
// megabytes or more) would stay between polls for nothing but a walk after
// a change of hints (rare: a service port added or removed), which decodes
// them again instead.
func (l *LegacyReader) dropTables() {
	for _, f := range l.fams {
		for _, t := range f.tables {
			if t.read {
				t.table, t.opaque = nil, nil
			}
		}
	}
}

// read refreshes every table; changed says whether any differs from the
// last read.
func (l *LegacyReader) read(ctx context.Context, need readNeed) (bool, error) {
	if l.fams == nil {
		for _, v6 := range []bool{false, true} {
			if v6 && !l.IPv6 {
				continue
			}
			f := &legacyFamily{v6: v6, fam: model.IPv4, tables: map[string]*legacyTable{}}
			if v6 {
				f.fam, f.tag = model.IPv6, "ip6 "
			}
			l.fams = append(l.fams, f)
		}
	}
	changed := false
	if need != needMissing {
		l.stats.Bytes = 0
	}
	for _, f := range l.fams {
		c, err := l.readFamily(ctx, f, need)
		if err != nil {
			return false, fmt.Errorf("iptables-legacy %s: %w", f.fam, err)
		}
		changed = changed || c
	}
	return changed, nil
}

func (l *LegacyReader) readFamily(ctx context.Context, f *legacyFamily, need readNeed) (bool, error) {
	file := "ip_tables_names"
	if f.v6 {
		file = "ip6_tables_names"
	}
	names, err := nsutil.ReadProcNet(l.NetNS, file)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return false, err
	}
	present := map[string]bool{}
	for _, n := range strings.Fields(names) {
		present[n] = true
	}
	if !present["nat"] {
		// No legacy tables: what iptables-legacy-save's path reads as an
		// empty dump (no tables; the walk warns).
		changed := len(f.tables) != 0
		f.tables = map[string]*legacyTable{}
		return changed, nil
	}
	fd, err := legacySocket(l.NetNS, f.v6)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	changed := false
	for _, name := range nlTables {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		t := f.tables[name]
		if t == nil {
			t = &legacyTable{}
			f.tables[name] = t
			changed = true
		}
		if need == needMissing && t.table != nil {
			continue
		}
		if !present[name] {
			// iptables-legacy-save -t filter would instantiate the table and
			// print its empty built-in chains; the same without creating it.
			if t.read || t.table == nil {
				*t = legacyTable{table: emptyBuiltinTable(name)}
				changed = true
			}
			continue
		}
		c, err := l.readTable(fd, f.v6, name, t, need)
		if err != nil {
			return false, fmt.Errorf("%s table: %w", name, err)
		}
		changed = changed || c
	}
	return changed, nil
}

// readTable copies one table and decodes it unless its bytes are those of
// the last read. A table replaced between the two getsockopts is read again.
func (l *LegacyReader) readTable(fd int, v6 bool, name string, t *legacyTable, need readNeed) (bool, error) {
	var info tableInfo
	var buf []byte
	var err error
	defer func() { unmapEntries(buf) }()
	for attempt := 0; ; attempt++ {
		if info, err = getInfo(fd, v6, name); err != nil {
			return false, err
		}
		buf, err = getEntries(fd, v6, name, info, buf)
		if err == nil {
			var after tableInfo
			if after, err = getInfo(fd, v6, name); err != nil {
				return false, err
			}
			if after == info {
				break
			}
			err = errTableChanged
		}
		if !errors.Is(err, errTableChanged) || attempt == 4 {
			return false, err
		}
	}
	l.stats.Copies++
	blob := buf[getEntriesHdr:]
	zeroCounters(v6, blob)
	l.stats.Bytes += len(blob)
	sum := sha256.Sum256(blob)
	if t.read && (t.table != nil || need == needChanged) && info == t.info && sum == t.sum {
		return false, nil
	}
	// The old table goes before the new one is built: in a large cluster
	// each is a hundred megabytes or more, and both at once would set the
	// agent's peak RSS.
	t.table, t.opaque, t.read = nil, nil, false
	chains, err := decodeLegacyTable(v6, info, blob)
	// The entries are not needed once decoded: unmapped before the table
	// is built, the mapping and the table's allocations do not add up in
	// the peak RSS.
	unmapEntries(buf)
	buf = nil // the deferred unmap has nothing left to do
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrLegacyUndecodable, err)
	}
	tb, opaque, err := legacyIPTable(name, chains)
	if err != nil {
		return false, err
	}
	l.stats.Decodes++
	t.info, t.table, t.opaque = info, tb, opaque
	t.sum, t.read, t.kube = sum, true, kubeChains(tb)
	return true, nil
}

func kubeChains(t *ipTable) int {
	n := 0
	for name := range t.chains {
		if strings.HasPrefix(name, "KUBE-") {
			n++
		}
	}
	return n
}

// emptyBuiltinTable is a table with its built-in chains and no rules.
func emptyBuiltinTable(name string) *ipTable {
	t := &ipTable{name: name, chains: map[string]*ipChain{}}
	builtins := []string{"INPUT", "FORWARD", "OUTPUT"}
	if name == "nat" {
		builtins = []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}
	}
	for _, c := range builtins {
		ch := &ipChain{name: c}
		t.chains[c] = ch
		t.order = append(t.order, ch)
	}
	return t
}

// legacyIPTable parses decoded chains into the parser's table form. A rule
// that was not decoded fails in a KUBE-* chain and marks its chain otherwise.
func legacyIPTable(name string, chains []legacyChain) (*ipTable, map[string]string, error) {
	t := &ipTable{name: name, chains: make(map[string]*ipChain, len(chains))}
	opaque := map[string]string{}
	for i := range chains {
		lc := chains[i]
		chains[i].rules = nil // decoded once parsed: garbage as the table is built, not after
		ch := &ipChain{name: lc.name}
		t.chains[lc.name] = ch
		t.order = append(t.order, ch)
		for _, r := range lc.rules {
			if r.err != nil {
				if strings.HasPrefix(lc.name, "KUBE-") {
					return nil, nil, fmt.Errorf("%w: %s %v", ErrLegacyUndecodable, name, r.err)
				}
				if _, seen := opaque[lc.name]; !seen {
					opaque[lc.name] = r.err.Error()
				}
				continue
			}
			if err := t.addNLRule(ch, nlRule{chain: lc.name, args: r.args}, true); err != nil {
				return nil, nil, fmt.Errorf("%w: %s %v", ErrLegacyUndecodable, name, err)
			}
		}
	}
	return t, opaque, nil
}

// walk maps the cached tables to the observed state (what Parse does after
// parsing the text).
func (l *LegacyReader) walk(hints model.Hints) (model.Observed, error) {
	l.stats.Walks++
	obs := model.Observed{Datapath: model.ModeIPTables, Frontends: map[model.Frontend]model.Verdict{}}
	idx := newParseIndex(hints)
	for _, f := range l.fams {
		d := ipDump{}
		for name, t := range f.tables {
			d[name] = t.table
			for _, c := range t.table.chains {
				c.res, c.done, c.busy = chainResult{}, false, false
			}
		}
		if _, ok := ipvsModeDump(d); ok {
			// Parse refuses such a dump with a message naming the capture to
			// take; let the iptables-legacy-save path say it.
			return model.Observed{}, fmt.Errorf("%w: %s: kube-proxy's IPVS-mode rules", ErrLegacyUndecodable, f.fam)
		}
		w := newWalker(f.fam, f.tag, d, idx)
		w.run()
		if t := f.tables["nat"]; t != nil {
			for chain, why := range t.opaque {
				if c := w.nat.chains[chain]; c != nil && c.done {
					return model.Observed{}, fmt.Errorf("%w: %s nat chain %s, reached from kube-proxy's chains: %s", ErrLegacyUndecodable, f.fam, chain, why)
				}
			}
		}
		for fe, v := range w.verdicts() {
			obs.Frontends[fe] = v
		}
		obs.Warnings = append(obs.Warnings, w.warnings...)
	}
	return obs, nil
}
