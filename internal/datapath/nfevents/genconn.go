package nfevents

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/mdlayher/netlink"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
	"golang.org/x/sys/unix"
)

// Generation asks the kernel for the current nf_tables generation id in
// a network namespace ("" for the caller's). Reading the same id before and
// after a multi-request read proves the read was consistent. It opens and
// closes a socket: a poller keeps one in a GenConn instead.
func Generation(netns string) (uint32, error) {
	c, err := dialNetfilter(netns)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return nftGenerationOn(c)
}

// GenConn asks for the nf_tables generation over one nfnetlink socket kept
// between queries, opened on first use. Closing a NETLINK_NETFILTER socket
// takes the nf_tables commit mutex (the kernel drops the tables the socket
// owned), so a socket closed per poll waits for any batch being committed,
// as long as a large kube-proxy sync takes. The zero value
// with NetNS set is ready; it is not safe for concurrent use.
type GenConn struct {
	NetNS string
	c     *netlink.Conn
}

// Generation is the current generation id; a failed request is retried
// once on a new socket.
func (g *GenConn) Generation() (uint32, error) {
	var id uint32
	err := g.do(func(c *netlink.Conn) (err error) {
		id, err = nftGenerationOn(c)
		return err
	})
	return id, err
}

// execute sends one request on the kept socket (no retry: a dump's
// caller decides).
func (g *GenConn) execute(req netlink.Message) ([]netlink.Message, error) {
	if g.c == nil {
		c, err := dialNetfilter(g.NetNS)
		if err != nil {
			return nil, err
		}
		g.c = c
	}
	msgs, err := g.c.Execute(req)
	if err != nil {
		g.drop()
	}
	return msgs, err
}

func (g *GenConn) do(fn func(*netlink.Conn) error) error {
	for attempt := 0; ; attempt++ {
		if g.c == nil {
			c, err := dialNetfilter(g.NetNS)
			if err != nil {
				return err
			}
			g.c = c
		}
		err := fn(g.c)
		if err == nil || attempt > 0 {
			return err
		}
		g.drop()
	}
}

func (g *GenConn) drop() {
	if g.c != nil {
		_ = g.c.Close()
		g.c = nil
	}
}

// Close closes the kept socket; the next query opens one again.
func (g *GenConn) Close() error {
	if g.c == nil {
		return nil
	}
	err := g.c.Close()
	g.c = nil
	return err
}

// dialNetfilter opens a netfilter netlink socket in netns ("" = own).
func dialNetfilter(netns string) (*netlink.Conn, error) {
	var c *netlink.Conn
	err := nsutil.WithFd(netns, func(fd int) error {
		var err error
		if c, err = netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: fd}); err != nil {
			return DialError(err)
		}
		return nil
	})
	return c, err
}

func nftGenerationOn(c *netlink.Conn) (uint32, error) {
	req := netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(nfnlSubsysNFTables<<8 | nftMsgGetGen),
			Flags: netlink.Request,
		},
		Data: []byte{unix.AF_UNSPEC, 0 /* NFNETLINK_V0 */, 0, 0},
	}
	msgs, err := c.Execute(req)
	if err != nil {
		return 0, fmt.Errorf("nf_tables getgen: %w", err)
	}
	for _, m := range msgs {
		if _, g, ok, err := parseChangeMessage(m); ok && g != nil && err == nil {
			return g.ID, nil
		}
	}
	return 0, errors.New("nf_tables getgen: no generation in the reply")
}

// DialError marks a kernel without nf_tables as unsupported.
func DialError(err error) error {
	if errors.Is(err, syscall.EPROTONOSUPPORT) || errors.Is(err, syscall.EAFNOSUPPORT) {
		return fmt.Errorf("%w: nf_tables netlink: %v", model.ErrUnsupported, err)
	}
	return err
}

// ListChains dumps the chains of every table of an nfproto family (one
// GETCHAIN request on the kept socket; no retry): each as a chain Op
// (Family, Table, Chain, Handle). A reader that keeps a table's chains
// needs their handles to tell a chain created by a transaction from one
// renamed (a NEWCHAIN of a new name with an old handle).
func (g *GenConn) ListChains(family uint8) ([]Op, error) {
	req := netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(nfnlSubsysNFTables<<8 | unix.NFT_MSG_GETCHAIN),
			Flags: netlink.Request | netlink.Dump},
		Data: []byte{family, 0, 0, 0},
	}
	msgs, err := g.execute(req)
	if err != nil {
		return nil, fmt.Errorf("list chains: %w", err)
	}
	out := make([]Op, 0, len(msgs))
	for _, m := range msgs {
		it, _, ok, err := parseChangeMessage(m)
		if err != nil || !ok || it.Object != "chain" {
			continue
		}
		op, err := parseOp(m, it, nil)
		if err != nil {
			return nil, fmt.Errorf("list chains: %w", err)
		}
		out = append(out, op)
	}
	return out, nil
}
