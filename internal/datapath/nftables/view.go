package nftables

import (
	"sort"

	"github.com/netdrift/netdrift/internal/model"
)

// nftView is the observed state of the kube-proxy tables kept per
// destination (map key), with the chains each destination's verdict depends
// on. A change event that names a few chains re-evaluates only the
// destinations that reach them, instead of the whole table: the work of a
// change does not grow with the cluster (docs/architecture.md, "Reading
// cost"). The offline path builds one and reads it once.
type nftView struct {
	hints  model.Hints
	tables []*nftTableView // parallel to the tables; nil for an absent one
	obs    model.Observed
	// derived from hints once per view (each costs a pass over every
	// service port), not once per change
	names     *nftNameIndex
	hintIndex map[nftHintKey]model.FrontendKind
}

type nftTableView struct {
	t       *nftTable
	pre     []string // warnings about the table as a whole
	entries map[nftKey]*nftEntry
	keys    map[nftKey]*nftKeyView
	byChain map[string]map[nftKey]bool
}

type nftKeyView struct {
	fe    model.Frontend
	v     model.Verdict
	ok    bool // the table redirects something for it
	warns []string
	deps  []string // chains the verdict depends on
}

func (n *nftView) builder(t *nftTable, sink *[]string) *nftBuilder {
	if n.names == nil {
		n.names, n.hintIndex = newNFTNameIndex(n.hints.ServicePorts), nftHints(n.hints.Frontends)
	}
	return &nftBuilder{sink: sink, names: n.names, hints: n.hintIndex,
		haveHints: len(n.hints.Frontends) > 0, t: t, ev: newNFTEvaluator(t)}
}

// newNFTView evaluates every destination of the tables.
func newNFTView(tables []*nftTable, hints model.Hints) *nftView {
	n := &nftView{hints: hints, tables: make([]*nftTableView, len(tables))}
	for i, t := range tables {
		if t == nil {
			continue
		}
		tv := &nftTableView{t: t, keys: map[nftKey]*nftKeyView{}, byChain: map[string]map[nftKey]bool{}}
		b := n.builder(t, &tv.pre)
		tv.entries = b.table(t)
		for k, e := range tv.entries {
			tv.set(k, tv.evaluate(b, k, e))
		}
		n.tables[i] = tv
	}
	n.obs = n.assemble()
	return n
}

// evaluate decides one destination, recording the chains it depends on.
func (tv *nftTableView) evaluate(b *nftBuilder, k nftKey, e *nftEntry) *nftKeyView {
	kv := &nftKeyView{}
	b.sink = &kv.warns
	kv.deps = b.ev.tracing(func() { kv.fe, kv.v, kv.ok = b.entry(k, e) })
	return kv
}

func (tv *nftTableView) set(k nftKey, kv *nftKeyView) {
	if old := tv.keys[k]; old != nil {
		for _, c := range old.deps {
			delete(tv.byChain[c], k)
		}
	}
	tv.keys[k] = kv
	for _, c := range kv.deps {
		m := tv.byChain[c]
		if m == nil {
			m = map[nftKey]bool{}
			tv.byChain[c] = m
		}
		m[k] = true
	}
}

// assemble builds the Observed: frontends of every destination, warnings in
// the order a full evaluation gives them (per table, then per destination in
// key order).
func (n *nftView) assemble() model.Observed {
	obs := model.Observed{Datapath: model.ModeNFTables, Frontends: map[model.Frontend]model.Verdict{}}
	present := 0
	for _, tv := range n.tables {
		if tv == nil {
			continue
		}
		present++
		obs.Warnings = append(obs.Warnings, tv.pre...)
		var warned []nftKey
		for k, kv := range tv.keys {
			if kv.ok {
				obs.Frontends[kv.fe] = kv.v
			}
			if len(kv.warns) > 0 {
				warned = append(warned, k)
			}
		}
		sort.Slice(warned, func(i, j int) bool { return nftKeyLess(warned[i], warned[j]) })
		for _, k := range warned {
			obs.Warnings = append(obs.Warnings, tv.keys[k].warns...)
		}
	}
	if present == 0 {
		obs.Warnings = append(obs.Warnings, "no table ip kube-proxy or ip6 kube-proxy")
	}
	return obs
}

func (n *nftView) observed() model.Observed { return n.obs }

// rechain re-evaluates, in table i, the destinations that depend on the
// named chains (their rules changed; the maps did not), changing the
// observed frontends in place (the Reader's caller holds them only until
// its next Update; Frozen copies), and returns the frontends whose verdict
// may differ.
func (n *nftView) rechain(i int, chains []string) map[model.Frontend]bool {
	tv := n.tables[i]
	dirty := map[nftKey]bool{}
	for _, c := range chains {
		for k := range tv.byChain[c] {
			dirty[k] = true
		}
	}
	changed := map[model.Frontend]bool{}
	if len(dirty) == 0 {
		return changed
	}
	b := n.builder(tv.t, nil)
	frontends := n.obs.Frontends
	warnsMoved := false
	for k := range dirty {
		old := tv.keys[k]
		kv := tv.evaluate(b, k, tv.entries[k])
		if old.ok {
			delete(frontends, old.fe)
			changed[old.fe] = true
		}
		if kv.ok {
			frontends[kv.fe] = kv.v
			changed[kv.fe] = true
		}
		warnsMoved = warnsMoved || len(old.warns) > 0 || len(kv.warns) > 0
		tv.set(k, kv)
	}
	if warnsMoved {
		n.obs = n.assemble()
	}
	return changed
}
