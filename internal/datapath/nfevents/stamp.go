package nfevents

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/bpf"
)

// A stamper dates commits by the kernel's clock. Dated by the moment the
// watcher's thread reads the first datagram, a transaction would be late by
// however long that thread waited for a CPU after the kernel queued it: on
// a busy node during a large sync, the commit itself, kube-proxy and other
// readers run then (see BENCHMARKS.md, "Live: the agent beside kube-proxy
// (issue 16)"). bpf/stamp.c, a socket filter on the watcher's socket, runs
// as the kernel queues each datagram; it records the kernel time of the
// first datagram after each NEWGEN in a ring slot tagged with the
// generation that commit will end with, and the watcher takes the slot
// when it handles that NEWGEN. Without the filter (no BPF on the kernel,
// no CAP_BPF) the watcher dates a transaction by the read of its first
// datagram.
type stamper struct {
	objs bpf.StampObjects
}

// stampSlots is bpf/stamp.c's STAMP_SLOTS: the watcher may fall this many
// commits behind and still find a commit's stamp.
const stampSlots = 64

// maxStampAge bounds how old a stamp may be when its NEWGEN is handled.
const maxStampAge = time.Minute

// attachStamper loads the filter, seeds it with the current generation
// gen (the next commit's first datagram is stamped as gen+1's) and
// attaches it to c's socket.
func attachStamper(c *netlink.Conn, gen uint32) (*stamper, error) {
	s := &stamper{}
	if err := bpf.LoadStampObjects(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("load the commit stamp: %w", err)
	}
	err := s.objs.State.Put(uint32(0), bpf.StampStampState{LastGen: gen})
	if err == nil {
		var rc syscall.RawConn
		if rc, err = c.SyscallConn(); err == nil {
			var serr error
			err = rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_BPF, s.objs.StampDatagram.FD())
			})
			err = errors.Join(err, serr)
		}
	}
	if err != nil {
		s.objs.Close()
		return nil, fmt.Errorf("attach the commit stamp: %w", err)
	}
	return s, nil
}

// stamp is when the commit that ended with generation gen sent its first
// datagram, by the wall clock; ok is false when its slot holds another
// generation's stamp (the filter missed the commit's start, or the watcher
// fell stampSlots commits behind) or an implausible one.
func (s *stamper) stamp(gen uint32) (time.Time, bool) {
	if s == nil {
		return time.Time{}, false
	}
	var v bpf.StampGenStamp
	if err := s.objs.Stamps.Lookup(gen%stampSlots, &v); err != nil || v.Gen != gen || v.Ns == 0 {
		return time.Time{}, false
	}
	return bpf.KtimeToWall(v.Ns, maxStampAge)
}

func (s *stamper) close() {
	if s != nil {
		s.objs.Close()
	}
}

// DatingNote says that change events are dated when read rather than by
// the kernel, and why (err from Watcher.Dating).
func DatingNote(err error) string {
	return fmt.Sprintf("nftables change events are dated when the agent reads them, not by the kernel (%v): "+
		"on a busy node lag may read late by the agent's wait for a CPU", err)
}
