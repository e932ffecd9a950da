package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/bpf"
)

// A stamper dates notification datagrams by the kernel's clock. The watcher
// dated a transaction by the moment its thread read the first datagram:
// late by however long the thread waited for a CPU after the kernel queued
// it (on a busy 2-core node during a 100k-endpoint sync, ~20 ms: the commit
// itself, kube-proxy and other readers run then). bpf/stamp.c, a socket
// filter on the watcher's socket, runs as the kernel queues each datagram
// and records bpf_ktime_get_ns under the datagram's first message's
// (sequence, port id); the watcher looks that key up for the first datagram
// of each transaction. Without the filter (no BPF on the kernel, no
// CAP_BPF) the watcher dates by its read, as before.
type stamper struct {
	objs bpf.StampObjects
}

// maxStampAge bounds how old a stamp may be to date a datagram read now:
// an older one is some other datagram's under a reused key.
const maxStampAge = 10 * time.Second

// attachStamper loads the filter and attaches it to c's socket.
func attachStamper(c *netlink.Conn) (*stamper, error) {
	s := &stamper{}
	if err := bpf.LoadStampObjects(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("load the notification stamp: %w", err)
	}
	rc, err := c.SyscallConn()
	if err == nil {
		var serr error
		err = rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_BPF, s.objs.StampDatagram.FD())
		})
		err = errors.Join(err, serr)
	}
	if err != nil {
		s.objs.Close()
		return nil, fmt.Errorf("attach the notification stamp: %w", err)
	}
	return s, nil
}

// stamp is when the kernel queued datagram, by the wall clock, taking
// (and deleting) its stamp; ok is false when there is none to take or it
// is not plausible (older than maxStampAge, or in the future).
func (s *stamper) stamp(datagram []byte) (time.Time, bool) {
	if s == nil || len(datagram) < unix.NLMSG_HDRLEN {
		return time.Time{}, false
	}
	key := bpf.StampStampKey{
		Seq:    binary.NativeEndian.Uint32(datagram[8:12]),
		Portid: binary.NativeEndian.Uint32(datagram[12:16]),
	}
	var kt uint64
	if err := s.objs.Stamps.Lookup(&key, &kt); err != nil {
		return time.Time{}, false
	}
	_ = s.objs.Stamps.Delete(&key)
	return monoToWall(kt, maxStampAge)
}

// monoToWall converts a CLOCK_MONOTONIC reading in ns to the wall clock;
// ok is false when it is in the future or more than maxAge ago.
func monoToWall(mono uint64, maxAge time.Duration) (time.Time, bool) {
	var ts unix.Timespec
	now := time.Now()
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return time.Time{}, false
	}
	age := time.Duration(ts.Nano() - int64(mono))
	if age < 0 || age > maxAge {
		return time.Time{}, false
	}
	return now.Add(-age), true
}

func (s *stamper) close() {
	if s != nil {
		s.objs.Close()
	}
}
