package nfevents

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The watcher reads its datagrams into one buffer it keeps, and hands the
// messages in it to handle in place: handle copies what it keeps (names,
// rule and element bytes). netlink.Conn.Receive allocates a buffer for
// every datagram and copies every message out of it again, which under an
// iptables-nft sync (thousands of rule messages) is a large share of what
// the agent would allocate (see BENCHMARKS.md, "Live: the agent beside
// kube-proxy (issue 16)").

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
		n, rerr = recvTrunc(int(fd), r.buf)
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

// recvTrunc is recv(2) with MSG_DONTWAIT|MSG_TRUNC: the datagram's whole
// length, however much of it buf took. unix.Recvfrom allocates a sender
// address on every call, which netlink notifications do not need.
func recvTrunc(fd int, buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, syscall.EINVAL
	}
	n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
		unix.MSG_DONTWAIT|unix.MSG_TRUNC, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// eachMessage calls fn for every netlink message of a datagram, in place
// (Data aliases b). syscall.ParseNetlinkMessage does the same but builds a
// slice of every datagram's messages first, and a large iptables-nft sync
// is a thousand datagrams or more.
func eachMessage(b []byte, fn func(netlink.Message)) error {
	ne := binary.NativeEndian
	for len(b) >= unix.NLMSG_HDRLEN {
		n := int(ne.Uint32(b))
		if n < unix.NLMSG_HDRLEN || nlmsgAlign(n) > len(b) && n != len(b) {
			return fmt.Errorf("netlink datagram: a message of %d bytes in the %d left: %w", n, len(b), syscall.EINVAL)
		}
		fn(netlink.Message{
			Header: netlink.Header{
				Length: uint32(n), Type: netlink.HeaderType(ne.Uint16(b[4:])),
				Flags: netlink.HeaderFlags(ne.Uint16(b[6:])), Sequence: ne.Uint32(b[8:]), PID: ne.Uint32(b[12:]),
			},
			Data: b[unix.NLMSG_HDRLEN:n:n],
		})
		b = b[min(nlmsgAlign(n), len(b)):]
	}
	return nil // as syscall.ParseNetlinkMessage, a tail shorter than a header is padding
}

func nlmsgAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }
