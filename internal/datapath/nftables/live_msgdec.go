package nftables

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// msgDecoder decodes the rule and element messages an event carries with
// the library's own decoders: a NEWRULE notification is what a GETRULE dump
// answers for the rule, a NEWSETELEM / DELSETELEM one what a GETSETELEM
// dump answers, so a nftables.Conn whose requests are answered with the
// carried message (nltest's in-memory socket: nothing is sent anywhere)
// returns the rule or elements exactly as a kernel read would. The reader
// then reduces them with the same code as a read (convertRule, mapElems).
type msgDecoder struct {
	conn  *nftables.Conn
	table *nftables.Table
	reply []netlink.Message // the answer to the next request
}

func newMsgDecoder(table *nftables.Table) (*msgDecoder, error) {
	d := &msgDecoder{table: table}
	c, err := nftables.New(nftables.AsLasting(), nftables.WithTestDial(d.answer))
	if err != nil {
		return nil, err
	}
	d.conn = c
	return d, nil
}

// answer hands out the prepared reply once; other requests get nothing.
func (d *msgDecoder) answer(req []netlink.Message) ([]netlink.Message, error) {
	out := d.reply
	d.reply = nil
	return out, nil
}

func (d *msgDecoder) message(typ uint16, data []byte) netlink.Message {
	b := make([]byte, 4, 4+len(data))
	b[0] = byte(d.table.Family) // nfgenmsg: family, version 0, resource id 0
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | int(typ))},
		Data:   append(b, data...),
	}
}

// rule decodes one NEWRULE message's attributes.
func (d *msgDecoder) rule(chain string, data []byte) (*nftables.Rule, error) {
	d.reply = []netlink.Message{d.message(unix.NFT_MSG_NEWRULE, data)}
	rs, err := d.conn.GetRules(d.table, &nftables.Chain{Name: chain, Table: d.table})
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 {
		return nil, fmt.Errorf("rule message of chain %s: %d rules", chain, len(rs))
	}
	return rs[0], nil
}

// elements decodes one NEWSETELEM or DELSETELEM message's attributes.
func (d *msgDecoder) elements(set string, data []byte) ([]nftables.SetElement, error) {
	d.reply = []netlink.Message{d.message(unix.NFT_MSG_NEWSETELEM, data)}
	return d.conn.GetSetElements(&nftables.Set{Table: d.table, Name: set})
}

// close releases the in-memory connection.
func (d *msgDecoder) close() { _ = d.conn.CloseLasting() }
