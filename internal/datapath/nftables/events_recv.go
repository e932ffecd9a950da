package nftables

import (
	"fmt"
	"syscall"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The watcher reads its datagrams into one buffer it keeps, and hands the
// messages in it to handle in place: handle copies what it keeps (names,
// rule and element bytes). netlink.Conn.Receive allocated a buffer for
// every datagram and copied every message out of it again, which under an
// iptables-nft sync (thousands of rule messages) was half of what the agent
// allocated and a share of its CPU (BENCHMARKS.md, "Live").

// recvBufferSize is the first buffer; nf_tables coalesces notifications
// into datagrams of about a page, and a larger one grows the buffer.
const recvBufferSize = 64 << 10

// datagramReader receives whole datagrams from a netlink socket through its
// poller (the socket is non-blocking: a wait costs no thread).
type datagramReader struct {
	rc  syscall.RawConn
	buf []byte
}

func newDatagramReader(c *netlink.Conn) (*datagramReader, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &datagramReader{rc: rc, buf: make([]byte, recvBufferSize)}, nil
}

// errTruncated: a datagram was longer than the buffer and its tail is lost;
// the buffer has grown for the next ones.
var errTruncated = fmt.Errorf("nf_tables notification longer than the receive buffer: %w", syscall.ENOBUFS)

// read returns the next datagram, valid until the next read. A datagram
// longer than the buffer is reported as lost notifications (the caller
// resyncs), as an overrun is.
func (r *datagramReader) read() ([]byte, error) {
	var n int
	var rerr error
	err := r.rc.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), r.buf, unix.MSG_DONTWAIT|unix.MSG_TRUNC)
		return rerr != unix.EAGAIN && rerr != unix.EWOULDBLOCK
	})
	if err != nil {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	if n > len(r.buf) {
		r.buf = make([]byte, max(n, 2*len(r.buf)))
		return nil, errTruncated
	}
	return r.buf[:n], nil
}

// eachMessage calls fn for every netlink message of a datagram, split by
// the standard library (syscall.ParseNetlinkMessage: Data aliases b).
func eachMessage(b []byte, fn func(netlink.Message)) error {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return fmt.Errorf("netlink datagram of %d bytes: %w", len(b), err)
	}
	for _, m := range msgs {
		fn(netlink.Message{
			Header: netlink.Header{
				Length: m.Header.Len, Type: netlink.HeaderType(m.Header.Type),
				Flags: netlink.HeaderFlags(m.Header.Flags), Sequence: m.Header.Seq, PID: m.Header.Pid,
			},
			Data: m.Data,
		})
	}
	return nil
}
