package nftables

// The message path of Reader.Update. When an event carries all of its
// transaction's messages for the kube-proxy tables (ChangeEvent.Ops,
// OpsComplete), the reader applies them to copies of what they touch in its
// cached tables — rules by handle at the place the kernel reports
// (live_ops_chains.go), the reader's maps and cluster-ips element by element,
// anonymous sets created with their rule in the same transaction
// (live_ops_sets.go) — and installs the copies only when every message was
// understood: nothing is read from the kernel. Anything else (a handle it
// does not know, a place the messages do not decide, a chain that becomes
// reachable whose rules it never read, a rule that references a named data
// map) leaves the cache as it was, and the event's chains and maps are read
// again from the kernel. A chain renamed (live_names.go) makes the next read a full one.

import (
	"errors"
	"fmt"

	"net/netip"

	"github.com/google/nftables"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
)

// errOpsRead: the messages do not decide the change; read what it names.
var errOpsRead = errors.New("nftables ops: read again")

// errOpsFull: the messages say the cache cannot be patched (a rename).
var errOpsFull = errors.New("nftables ops: read everything again")

// KubeProxyTables are kube-proxy's nftables tables, whose messages the
// Reader patches its cache from (Reader.Update).
var KubeProxyTables = []nfevents.TableRef{{Family: "ip", Table: nftTableName}, {Family: "ip6", Table: nftTableName}}

func opsReadf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errOpsRead}, a...)...)
}

// opTable is one event's messages applied to one cached table.
type opTable struct {
	t      *nftTable
	conv   *nftNetlinkReader // reduces decoded rules (sets from anon)
	dec    *msgDecoder
	chains map[string]*opChain
	anon   map[string][][]byte // sets created by the transaction: their element messages
	maps   map[string]*opMap   // the reader's maps the messages touched
	cips   map[netip.Addr]bool // cluster-ips as patched; nil: untouched
	hasCIP bool
	roots  []string // targets of map elements added
	top    uint64   // MaxChainHandle as patched
}

// applyOpsLocked patches the cached tables from the event's messages. done
// false: nothing changed, the caller reads what the event names (full:
// everything).
func (n *Reader) applyOpsLocked(ev nfevents.Event) (done, full bool) {
	if !ev.OpsComplete || int32(ev.Generation-n.cache.gen) <= 0 {
		return false, false // not all of them, or a full read may already hold them
	}
	var txs []*opTable
	defer func() {
		for _, tx := range txs {
			tx.dec.close()
		}
	}()
	for i, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
		nf := nftFamilyOf(fam)
		if !ev.TouchesTable(nf, nftTableName) {
			continue
		}
		t := n.cache.tables[i]
		if t == nil || t.Names == nil {
			return false, false
		}
		tx, err := newOpTable(t, fam)
		if err != nil {
			return false, false
		}
		txs = append(txs, tx)
		if err := tx.run(ev.Ops, nf); err != nil {
			n.opFallbacks++
			return false, errors.Is(err, errOpsFull)
		}
	}
	for _, tx := range txs {
		tx.commit()
	}
	n.opPatches++
	return true, false
}

func newOpTable(t *nftTable, fam model.IPFamily) (*opTable, error) {
	table := &nftables.Table{Name: nftTableName, Family: nftTableFamily(fam)}
	dec, err := newMsgDecoder(table)
	if err != nil {
		return nil, err
	}
	tx := &opTable{t: t, dec: dec, chains: map[string]*opChain{}, anon: map[string][][]byte{},
		maps: map[string]*opMap{}, top: t.MaxChainHandle}
	tx.conv = &nftNetlinkReader{table: table, t: t, sets: tx.anonElements}
	return tx, nil
}

// run applies the ops of family nf's kube-proxy table in commit order, then
// checks that every chain the patched rules reach is known.
func (tx *opTable) run(ops []nfevents.Op, nf string) error {
	mine := make([]nfevents.Op, 0, len(ops))
	for _, op := range ops {
		if op.Family == nf && op.Table == nftTableName {
			mine = append(mine, op)
		}
	}
	next := nextOfChain(mine)
	for i, op := range mine {
		var err error
		switch op.Object {
		case "rule", "chain":
			err = tx.chainOp(mine, i, next[i])
		case "set":
			err = tx.setOp(op)
		case "element":
			err = tx.elementOp(op)
		default:
			err = opsReadf("%s %s", op.Op, op.Object)
		}
		if err != nil {
			return err
		}
	}
	return tx.reach()
}

// nextOfChain gives, per op, the index of the next op of the same chain (-1: none).
func nextOfChain(ops []nfevents.Op) []int {
	next := make([]int, len(ops))
	last := map[string]int{}
	for i := len(ops) - 1; i >= 0; i-- {
		next[i] = -1
		if ops[i].Object != "rule" && ops[i].Object != "chain" {
			continue
		}
		if j, ok := last[ops[i].Chain]; ok {
			next[i] = j
		}
		last[ops[i].Chain] = i
	}
	return next
}

// reach walks from the chains the messages changed and the targets of map
// elements they added, as readReachable does after a re-read: every chain
// reached must be known (cached, or created with its rules by the
// transaction); one that exists unread means a read.
func (tx *opTable) reach() error {
	queue := append([]string(nil), tx.roots...)
	for name, c := range tx.chains {
		if c.state == chainKnown && c.changed {
			queue = append(queue, name)
		}
	}
	seen := map[string]bool{}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		rules, ok := tx.rulesOf(name)
		if !ok {
			continue
		}
		for _, rl := range rules {
			queue = append(queue, rl.Verdict.Target)
			for _, v := range rl.VMap {
				queue = append(queue, v.Target)
			}
		}
	}
	for name := range seen {
		if c := tx.chains[name]; (c != nil && c.state == chainOpaque) || (c == nil && tx.unread(name)) {
			return opsReadf("chain %s becomes reachable, its rules were never read", name)
		}
	}
	return nil
}

// unread reports a chain the kernel has that the cache does not hold.
func (tx *opTable) unread(name string) bool {
	_, cached := tx.t.Chains[name]
	return !cached && tx.t.Names[name]
}

// rulesOf returns a chain's rules as patched; ok false when not known.
func (tx *opTable) rulesOf(name string) ([]nftRule, bool) {
	if c := tx.chains[name]; c != nil {
		if c.state != chainKnown {
			return nil, false
		}
		return c.ruleList(), true
	}
	rules, ok := tx.t.Chains[name]
	return rules, ok
}

// commit installs the patched chains, maps and cluster-ips in the table.
func (tx *opTable) commit() {
	t := tx.t
	for name, c := range tx.chains {
		switch c.state {
		case chainKnown:
			t.Chains[name], t.Names[name] = c.ruleList(), true
		case chainAbsent:
			delete(t.Chains, name)
			delete(t.Names, name)
		}
	}
	t.MaxChainHandle = tx.top
	for name, m := range tx.maps {
		if m.present {
			t.Maps[name] = m.list()
		} else {
			delete(t.Maps, name)
		}
	}
	if tx.cips != nil {
		t.ClusterIPs, t.HasClusterIPSet = tx.cips, tx.hasCIP
	}
}
