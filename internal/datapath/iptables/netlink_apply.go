package iptables

// The steps of NFTReader.ApplyEvent: which chains an event changed, which
// of them its rule messages patch (netlink_ops.go), and the reads of the
// rest.

import (
	"context"
	"errors"
	"time"

	"github.com/netdrift/netdrift/internal/datapath/nfevents"
)

type tableKey struct {
	fam   *nlFamily
	table string
}

// chainSet is, per cached table, the chains an event changed: true when
// the chain must be read again, false when it was patched.
type chainSet map[tableKey]map[string]bool

// namedChains sorts an event's changes: chains per table, and the tables
// to read whole (a table message, a rule or chain without a name).
func (n *NFTReader) namedChains(changes []nfevents.Change) (chainSet, map[tableKey]bool) {
	chains := chainSet{}
	whole := map[tableKey]bool{}
	for _, ch := range changes {
		f := n.family(ch.Family)
		if f == nil || (ch.Table != "nat" && ch.Table != "filter") {
			continue
		}
		k := tableKey{f, ch.Table}
		switch ch.Object {
		case "rule", "chain":
			if ch.Name == "" {
				whole[k] = true
				continue
			}
			if chains[k] == nil {
				chains[k] = map[string]bool{}
			}
			chains[k][ch.Name] = true
		case "table":
			whole[k] = true
		}
	}
	return chains, whole
}

// patch applies the event's rule messages to the chains they describe:
// patched chains are marked false in chains (changed, not to be read),
// chains that came out the same are removed, a table to read whole is
// added to whole.
func (n *NFTReader) patch(ev nfevents.Event, chains chainSet, whole map[tableKey]bool) {
	ops := n.opsByChain(ev)
	if ops == nil {
		return
	}
	for k, names := range chains {
		for name := range names {
			cops, ok := ops[opChain{k.fam, k.table, name}]
			if !ok || whole[k] {
				continue
			}
			switch n.patchChain(k.fam, k.table, name, cops) {
			case patchDone:
				names[name] = false
				n.stats.LastPatched++
			case patchSame:
				delete(names, name)
				n.stats.LastPatched++
				n.stats.LastSame++
			case patchTable:
				whole[k] = true
				n.stats.PatchFallbacks++
			default:
				n.stats.PatchFallbacks++
			}
		}
	}
	n.stats.PatchedChains += n.stats.LastPatched
	if n.stats.LastPatched > 0 {
		n.patched = true
	}
}

// reread reads the tables in whole and the chains still marked true.
func (n *NFTReader) reread(ctx context.Context, chains chainSet, whole map[tableKey]bool) error {
	need := len(whole) > 0
	for _, names := range chains {
		for _, read := range names {
			need = need || read
		}
	}
	if !need {
		return nil
	}
	return n.withConn(func(c *nlConn) error {
		for k := range whole {
			if err := n.retryInterrupted(func() error { return n.readTable(ctx, c, k.fam, k.table) }); err != nil {
				return err
			}
			k.fam.view = nil
			delete(chains, k)
		}
		for k, names := range chains {
			for name, read := range names {
				if !read {
					continue
				}
				if err := n.retryInterrupted(func() error { return n.readChain(ctx, c, k.fam, k.table, name) }); err != nil {
					return err
				}
				n.stats.LastChains++
				n.stats.ChainReads++
			}
		}
		return nil
	})
}

// rereadAttempts bounds the attempts of one table's or chain's re-read for
// a change event; between two the reader waits fullReadBackoff, doubled
// each time (10+20+40 ms). A failed re-read drops every cached table, and
// the full read that follows is far likelier to be interrupted again by
// the same commits (at 100k endpoints it spans seconds, kube-proxy's syncs
// come every few), so a commit that lands during a chain's dump costs a
// second dump of that chain, not the cache.
const rereadAttempts = 4

// retryInterrupted runs read again while a commit interrupted its dump.
// The chain then reflects a later commit than the event's; that commit's
// own event re-reads or patches it again.
func (n *NFTReader) retryInterrupted(read func() error) error {
	for attempt := 1; ; attempt++ {
		err := read()
		if err == nil || !errors.Is(err, errDumpInterrupted) || attempt == rereadAttempts {
			return err
		}
		n.stats.ReadRetries++
		time.Sleep(fullReadBackoff << (attempt - 1))
	}
}
