package nftables

import (
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
)

// The chains a cached table has in the kernel (nftTable.Names): the message
// path needs them to tell a chain created by a transaction (its rules are
// all in the messages) from one that existed unread (unreachable before;
// its rules are not), and a chain renamed (a NEWCHAIN of a new name with an
// old handle: the kernel allocates handles from one increasing counter per
// table) from one created.

// readNamesLocked dumps the chains of family fam (one GETCHAIN request; its
// replies have a NEWCHAIN notification's format) and keeps those of the
// kube-proxy table in t.
func (n *Reader) readNamesLocked(fam model.IPFamily, t *nftTable) error {
	n.gen.NetNS = n.Config.NetNS
	n.kernelReads++
	chains, err := n.gen.ListChains(uint8(nftTableFamily(fam)))
	if err != nil {
		return err
	}
	names := make(map[string]bool, len(t.Chains))
	var top uint64
	for _, op := range chains {
		if op.Table != nftTableName {
			continue
		}
		names[op.Chain] = true
		top = max(top, op.Handle)
	}
	t.Names, t.MaxChainHandle = names, top
	return nil
}

// chainItems reports whether an event created or deleted chains of family/table.
func chainItems(ev nfevents.Event, family string) bool {
	for _, c := range ev.Changes {
		if c.Object == "chain" && c.Family == family && c.Table == nftTableName {
			return true
		}
	}
	return false
}
