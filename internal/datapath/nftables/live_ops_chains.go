package nftables

import "github.com/netdrift/netdrift/internal/datapath/nfevents"

// Chains and rules of the message path (live_ops.go). Placement follows
// the kernel's notification (nf_tables_rule_notify), as the iptables-nft
// reader's patching does (iptables/netlink_ops.go): a NEWRULE carries the
// handle of the rule before it at commit time (NFTA_RULE_POSITION), none
// when the rule is first or last in the chain then, and NLM_F_APPEND when
// the request appended or replaced. Where the messages do not decide (a
// replace at the head of a chain, a position naming a rule not notified
// yet), the event is read instead.

type chainState uint8

const (
	chainKnown  chainState = iota // its rules are known: cached, or created by the transaction
	chainOpaque                   // exists, never read: its rule messages are left aside
	chainAbsent                   // deleted by the transaction, or never there
)

// opChain is one chain as the messages leave it.
type opChain struct {
	state            chainState
	rules            []nftRule // in chain order
	changed          bool
	prev             *nfevents.Op // the chain's previous op in the transaction
	delHead, delTail bool         // the last rule deleted was first / last
}

func (c *opChain) ruleList() []nftRule { return c.rules }

// chain returns the chain as patched so far, from the cache on first use.
func (tx *opTable) chain(name string) *opChain {
	if c := tx.chains[name]; c != nil {
		return c
	}
	c := &opChain{state: chainAbsent}
	if rules, ok := tx.t.Chains[name]; ok {
		c.state, c.rules = chainKnown, append(make([]nftRule, 0, len(rules)+2), rules...)
	} else if tx.t.Names[name] {
		c.state = chainOpaque
	}
	tx.chains[name] = c
	return c
}

// chainOp applies ops[i], a rule or chain op; next is the index of the
// chain's next op (-1: none).
func (tx *opTable) chainOp(ops []nfevents.Op, i, next int) error {
	op := &ops[i]
	c := tx.chain(op.Chain)
	defer func() { c.prev = op }()
	switch {
	case op.Object == "chain" && op.Op == "new":
		if c.state != chainAbsent {
			return nil // an existing chain "added" again, or updated
		}
		if op.Handle <= tx.top {
			return errOpsFull // an old handle under a new name: a rename
		}
		tx.top = op.Handle
		c.state, c.rules, c.changed = chainKnown, nil, true
	case op.Object == "chain" && op.Op == "del":
		c.state, c.rules, c.changed = chainAbsent, nil, true
	case c.state == chainOpaque:
		return nil // not read, not reachable: as the re-read path, left aside
	case c.state == chainAbsent:
		return opsReadf("rule in chain %s, which does not exist", op.Chain)
	case op.Op == "del":
		j := c.index(op.Handle)
		if j < 0 {
			return opsReadf("chain %s: no rule with handle %d", op.Chain, op.Handle)
		}
		c.delHead, c.delTail = j == 0, j == len(c.rules)-1
		c.rules = append(c.rules[:j], c.rules[j+1:]...)
		c.changed = true
	default:
		return tx.addRule(c, ops, i, next)
	}
	return nil
}

func (tx *opTable) addRule(c *opChain, ops []nfevents.Op, i, next int) error {
	op := ops[i]
	at, ok := c.place(ops, i, next)
	if !ok {
		return opsReadf("chain %s: the messages do not place rule %d", op.Chain, op.Handle)
	}
	rl, err := tx.decodeRule(op)
	if err != nil {
		return err
	}
	c.rules = append(c.rules, nftRule{})
	copy(c.rules[at+1:], c.rules[at:])
	c.rules[at] = rl
	c.changed = true
	return nil
}

func (c *opChain) index(h uint64) int {
	for i := range c.rules {
		if c.rules[i].Handle == h {
			return i
		}
	}
	return -1
}

// place says at which index the new rule ops[i] goes; false when the
// messages do not tell.
func (c *opChain) place(ops []nfevents.Op, i, next int) (int, bool) {
	op := ops[i]
	if c.index(op.Handle) >= 0 {
		return 0, false
	}
	if op.Position != 0 {
		j := c.index(op.Position)
		return j + 1, j >= 0
	}
	if len(c.rules) == 0 {
		return 0, true
	}
	if p := c.prev; p != nil && p.Object == "rule" && p.Op == "del" {
		if p.Handle == op.Handle { // replaced in place, same handle
			switch {
			case c.delHead:
				return 0, true
			case c.delTail:
				return len(c.rules), true
			}
			return 0, false
		}
		if op.Append && c.delHead {
			return 0, false // maybe the first rule replaced (new handle): first or last?
		}
	}
	if !op.Append {
		return 0, true // inserted without a position: at the head
	}
	if next >= 0 && ops[next].Object == "rule" && ops[next].Op == "del" && ops[next].Handle == c.rules[0].Handle {
		return 0, false // a replace of the first rule, the new rule notified first
	}
	return len(c.rules), true
}

// decodeRule decodes a NEWRULE message with the library and reduces it as
// a read does; its anonymous sets come from the transaction.
func (tx *opTable) decodeRule(op nfevents.Op) (nftRule, error) {
	if len(op.Data) == 0 {
		return nftRule{}, opsReadf("chain %s rule %d: no message", op.Chain, op.Handle)
	}
	nr, err := tx.dec.rule(op.Chain, op.Data)
	if err != nil || nr.Handle != op.Handle {
		return nftRule{}, opsReadf("chain %s rule %d: decode: %v", op.Chain, op.Handle, err)
	}
	rl, err := tx.conv.convertRule(nr)
	if err != nil {
		return nftRule{}, opsReadf("chain %s rule %d: %v", op.Chain, op.Handle, err)
	}
	return rl, nil
}
