package iptables

// nlConn is the reader's nfnetlink socket: blocking system calls on a
// socket of its own and one receive buffer for every datagram. A full read
// sends one dump request per chain (about one per endpoint); through
// github.com/mdlayher/netlink each call starts a goroutine (its context
// watcher), wakes another thread, and copies every datagram into a new
// buffer before splitting it into new Messages. Here a message is a slice
// of the receive buffer, valid only while the callback that gets it runs:
// callers keep strings and values, never the bytes.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
)

// nlAnswerTimeout bounds the wait for the kernel's answer to a request.
const nlAnswerTimeout = 30

type nlConn struct {
	fd      int
	cleanup runtime.Cleanup // closes fd if the conn is dropped unclosed
	seq     uint32
	buf     []byte // receive
	out     []byte // send, reused
	// reqBuf: a request's payload, reused (send copies it into out).
	reqBuf []byte
}

// dialNFT opens an nfnetlink socket in the namespace ("" = the caller's).
func dialNFT(ns string) (*nlConn, error) {
	fd, err := nsutil.Socket(ns, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("%w: nf_tables netlink: %v", model.ErrUnsupported, err)
	}
	tv := unix.Timeval{Sec: nlAnswerTimeout}
	if err = unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err == nil {
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("nf_tables netlink: %w", err)
	}
	c := &nlConn{fd: fd, buf: make([]byte, nlRecvBuffer)}
	c.cleanup = runtime.AddCleanup(c, func(fd int) { _ = unix.Close(fd) }, fd)
	return c, nil
}

// Close closes the socket (once: the cleanup that would close it when the
// conn is garbage is cancelled first, so it never closes a reused fd).
func (c *nlConn) Close() error {
	c.cleanup.Stop()
	return unix.Close(c.fd)
}

// nlReq is one request: nfnetlink message type, flags, payload (the
// nfgenmsg header and the attributes).
type nlReq struct {
	typ, flags uint16
	data       []byte
}

// send sends a request and returns its sequence number.
func (c *nlConn) send(r nlReq) (uint32, error) {
	c.seq++
	n := unix.NLMSG_HDRLEN + len(r.data)
	if cap(c.out) < n {
		c.out = make([]byte, n)
	}
	b := c.out[:n]
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], r.typ)
	binary.NativeEndian.PutUint16(b[6:], r.flags)
	binary.NativeEndian.PutUint32(b[8:], c.seq)
	binary.NativeEndian.PutUint32(b[12:], 0)
	copy(b[unix.NLMSG_HDRLEN:], r.data)
	for {
		err := unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if err != unix.EINTR {
			return c.seq, err
		}
	}
}

// appendStrAttr appends a NUL-terminated string attribute, padded.
func appendStrAttr(b []byte, typ uint16, s string) []byte {
	n := nlaHeader + len(s) + 1
	b = binary.NativeEndian.AppendUint16(b, uint16(n))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, s...)
	b = append(b, 0)
	for ; n%4 != 0; n++ {
		b = append(b, 0)
	}
	return b
}

// errNoAnswer: the kernel did not answer within nlAnswerTimeout.
var errNoAnswer = errors.New("nf_tables netlink: no answer")

// receive hands fn each message answering seq (type, flags, payload)
// until the answer ends: NLMSG_DONE for a dump, else the first datagram
// that holds an answer. An error message is returned as its errno; after
// fn's first error the rest of the answer is read and dropped, so the
// socket stays usable.
func (c *nlConn) receive(seq uint32, dump bool, fn func(typ, flags uint16, data []byte) error) error {
	var ferr error
	for {
		n, err := unix.Read(c.fd, c.buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return errNoAnswer
		case err != nil:
			return err
		}
		done, answered, err := c.datagram(c.buf[:n], seq, func(typ, flags uint16, data []byte) {
			if ferr == nil {
				ferr = fn(typ, flags, data)
			}
		})
		if err != nil {
			return err
		}
		if done || !dump && answered {
			return ferr
		}
	}
}

// datagram walks one datagram's messages: those answering seq go to fn.
// done: the answer ended (NLMSG_DONE, or an error or acknowledgement).
func (c *nlConn) datagram(b []byte, seq uint32, fn func(typ, flags uint16, data []byte)) (done, answered bool, err error) {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return false, false, fmt.Errorf("nf_tables netlink: malformed message (length %d of %d)", l, len(b))
		}
		typ := binary.NativeEndian.Uint16(b[4:])
		flags := binary.NativeEndian.Uint16(b[6:])
		mseq := binary.NativeEndian.Uint32(b[8:])
		data := b[unix.NLMSG_HDRLEN:l]
		b = b[min(len(b), (l+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1)):]
		if mseq != seq {
			continue // the rest of an earlier answer
		}
		answered = true
		switch typ {
		case unix.NLMSG_NOOP:
		case unix.NLMSG_DONE, unix.NLMSG_ERROR:
			if len(data) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(data)); code < 0 {
					return true, true, unix.Errno(-code)
				}
			}
			return true, true, nil
		default:
			fn(typ, flags, data)
		}
	}
	return false, answered, nil
}

// execute sends a request that is not a dump and hands fn its answer.
func (c *nlConn) execute(r nlReq, fn func(typ uint16, data []byte) error) error {
	seq, err := c.send(r)
	if err != nil {
		return err
	}
	return c.receive(seq, false, func(typ, _ uint16, data []byte) error { return fn(typ, data) })
}
