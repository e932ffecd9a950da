package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// nf_tables netlink constants (include/uapi/linux/netfilter/nfnetlink.h and
// nf_tables.h): the subsystem, the multicast group, the NEWGEN message and
// its attributes. Every object message (table, chain, rule, set, element,
// object, flowtable) carries its table's name as attribute 1.
const (
	nfnlSubsysNFTables = 10
	nfnlGroupNFTables  = 7
	nftMsgNewGen       = 15
	nftaGenID          = 1
	nftaGenProcPID     = 2
	nftaGenProcName    = 3
	nftaTableAttr      = 1
	nlaTypeMask        = 0x3fff // without NLA_F_NESTED and NLA_F_NET_BYTEORDER
	nfgenmsgLen        = 4
	monitorRcvBuf      = 256 << 20
	monitorPoll        = 200 * time.Millisecond
)

var nfprotoNames = map[uint8]string{1: "inet", 2: "ip", 3: "arp", 5: "netdev", 7: "bridge", 10: "ip6"}

// txState collects one transaction's tables until its NEWGEN.
type txState struct {
	first  time.Time
	tables []string
}

// parseNFTDatagram hands add every transaction a datagram ends (one per
// NEWGEN), attributing the object messages before it, in this and earlier
// datagrams, to it. at is when the datagram was read. A malformed message
// ends the datagram's parsing with an error; what came before it counts.
func parseNFTDatagram(b []byte, at time.Time, tx *txState, add func(Commit)) error {
	for len(b) > 0 {
		if len(b) < unix.NLMSG_HDRLEN {
			return fmt.Errorf("netlink: %d trailing bytes", len(b))
		}
		n := int(binary.NativeEndian.Uint32(b[0:4]))
		typ := binary.NativeEndian.Uint16(b[4:6])
		if n < unix.NLMSG_HDRLEN || n > len(b) {
			return fmt.Errorf("netlink: message length %d of %d bytes", n, len(b))
		}
		body := b[unix.NLMSG_HDRLEN:n]
		b = b[min(nlAlign(n), len(b)):]
		if typ>>8 != nfnlSubsysNFTables || len(body) < nfgenmsgLen {
			continue
		}
		if tx.first.IsZero() {
			tx.first = at
		}
		family, attrs := body[0], body[nfgenmsgLen:]
		if typ&0xff == nftMsgNewGen {
			c := Commit{PID: -1, At: at, First: tx.first, Tables: tx.tables}
			if err := decodeNewGen(attrs, &c); err != nil {
				return err
			}
			add(c)
			*tx = txState{}
			continue
		}
		if name, ok := nlString(attrs, nftaTableAttr); ok {
			tx.addTable(tableKey(family, name))
		}
	}
	return nil
}

func (tx *txState) addTable(t string) {
	for _, x := range tx.tables {
		if x == t {
			return
		}
	}
	tx.tables = append(tx.tables, t)
}

func tableKey(family uint8, name string) string {
	f, ok := nfprotoNames[family]
	if !ok {
		f = fmt.Sprintf("family%d", family)
	}
	return f + " " + name
}

func decodeNewGen(attrs []byte, c *Commit) error {
	found := false
	err := walkAttrs(attrs, func(typ uint16, v []byte) {
		switch {
		case typ == nftaGenID && len(v) == 4:
			c.Gen, found = binary.BigEndian.Uint32(v), true
		case typ == nftaGenProcPID && len(v) == 4:
			c.PID = int(binary.BigEndian.Uint32(v))
		case typ == nftaGenProcName:
			c.Process = cString(v)
		}
	})
	if err == nil && !found {
		err = errors.New("netlink: NEWGEN without a generation id")
	}
	return err
}

// walkAttrs calls f for each attribute (type without its flag bits).
func walkAttrs(b []byte, f func(typ uint16, v []byte)) error {
	for len(b) >= unix.NLA_HDRLEN {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < unix.NLA_HDRLEN || l > len(b) {
			return fmt.Errorf("netlink: attribute length %d of %d bytes", l, len(b))
		}
		f(binary.NativeEndian.Uint16(b[2:4])&nlaTypeMask, b[unix.NLA_HDRLEN:l])
		b = b[min(nlAlign(l), len(b)):]
	}
	return nil
}

func nlString(b []byte, want uint16) (s string, ok bool) {
	_ = walkAttrs(b, func(typ uint16, v []byte) {
		if typ == want && !ok {
			s, ok = cString(v), true
		}
	})
	return s, ok
}

func cString(v []byte) string {
	for i, c := range v {
		if c == 0 {
			return string(v[:i])
		}
	}
	return string(v)
}

func nlAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// Monitor listens to a network namespace's nf_tables notifications on a
// thread of its own (locked to its goroutine; it ends with it).
type Monitor struct {
	stop atomic.Bool
	done chan struct{}
	cpu  atomic.Int64 // the thread's CPU (RUSAGE_THREAD) since the bind, updated as it reads
	base int64        // the thread's CPU at the bind: it may have run other goroutines before

	mu        sync.Mutex
	commits   []Commit
	datagrams int
	overruns  int // ENOBUFS: notifications the kernel dropped
	err       error
}

// StartMonitor binds the listener in the namespace at nsPath (a
// /run/netns file) and returns once it is bound: no commit after the
// return is missed unless the kernel reports an overrun. The caller must
// Stop it.
func StartMonitor(nsPath string) (*Monitor, error) {
	m := &Monitor{done: make(chan struct{})}
	ready := make(chan error, 1)
	go m.run(nsPath, ready)
	if err := <-ready; err != nil {
		<-m.done
		return nil, err
	}
	return m, nil
}

func (m *Monitor) run(nsPath string, ready chan<- error) {
	defer close(m.done)
	// The thread enters the node's namespace and is never handed back:
	// a goroutine that exits locked takes its thread with it.
	runtime.LockOSThread()
	fd, err := openNFTSocket(nsPath)
	m.base = threadCPU()
	ready <- err
	if err != nil {
		return
	}
	defer unix.Close(fd)
	buf := make([]byte, 1<<20)
	var tx txState
	for !m.stop.Load() {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		at := time.Now()
		m.noteCPU()
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			m.mu.Lock()
			m.overruns++
			m.mu.Unlock()
			tx = txState{} // its messages were lost with the rest
			continue
		case err != nil:
			m.fail(fmt.Errorf("nf_tables listener: recv: %w", err))
			return
		}
		if perr := m.parse(buf[:n], at, &tx); perr != nil {
			m.fail(perr)
			return
		}
	}
}

func (m *Monitor) parse(b []byte, at time.Time, tx *txState) error {
	var got []Commit
	err := parseNFTDatagram(b, at, tx, func(c Commit) { got = append(got, c) })
	m.mu.Lock()
	m.datagrams++
	m.commits = append(m.commits, got...)
	m.mu.Unlock()
	return err
}

func (m *Monitor) fail(err error) {
	m.mu.Lock()
	m.err = err
	m.mu.Unlock()
}

func (m *Monitor) noteCPU() {
	if c := threadCPU(); c >= 0 {
		m.cpu.Store(c - m.base)
	}
}

// threadCPU is the calling thread's CPU in ns (-1 when unknown).
func threadCPU() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// openNFTSocket enters the namespace (on the calling, locked thread) and
// opens a netlink socket there bound to the nf_tables group, with a large
// receive buffer and a receive timeout so the loop can see Stop.
func openNFTSocket(nsPath string) (int, error) {
	ns, err := os.Open(nsPath)
	if err != nil {
		return -1, fmt.Errorf("nf_tables listener: %w", err)
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return -1, fmt.Errorf("nf_tables listener: setns %s: %w", nsPath, err)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return -1, fmt.Errorf("nf_tables listener: socket: %w", err)
	}
	tv := unix.NsecToTimeval(monitorPoll.Nanoseconds())
	for _, err := range []error{
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, monitorRcvBuf),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
		unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (nfnlGroupNFTables - 1)}),
	} {
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("nf_tables listener: %w", err)
		}
	}
	return fd, nil
}

// Commits returns the commits read so far, in reading order.
func (m *Monitor) Commits() []Commit {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Commit(nil), m.commits...)
}

// CPU is the listener thread's CPU so far (as of its last read, at most
// monitorPoll old).
func (m *Monitor) CPU() time.Duration { return time.Duration(m.cpu.Load()) }

// Exited reports whether the listener stopped on an error.
func (m *Monitor) Exited() bool {
	select {
	case <-m.done:
		return !m.stop.Load()
	default:
		return false
	}
}

// MonitorStats is what a stopped listener reports.
type MonitorStats struct {
	Datagrams int
	Commits   int
	Overruns  int           // times the kernel dropped notifications (ENOBUFS)
	CPU       time.Duration // the listener thread's
	Err       error         // it stopped on an error
}

// Stop ends the listener (within monitorPoll) and reports.
func (m *Monitor) Stop() MonitorStats {
	m.stop.Store(true)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return MonitorStats{Datagrams: m.datagrams, Commits: len(m.commits), Overruns: m.overruns, CPU: m.CPU(), Err: m.err}
}

// Overruns is how many times the kernel dropped notifications so far.
func (m *Monitor) Overruns() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.overruns
}
