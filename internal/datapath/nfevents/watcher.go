package nfevents

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/netdrift/netdrift/internal/nsutil"
	"golang.org/x/sys/unix"
)

// Watcher follows nf_tables change notifications (netlink group
// NFNLGRP_NFTABLES) in one network namespace. It only listens: it never
// sends a request that changes anything. Events are hints (docs/architecture.md,
// "The reader contract"): on an event, re-read what it names.
type Watcher struct {
	netns  string
	conn   *netlink.Conn
	events chan Event
	gen    atomic.Uint32
	lost   atomic.Bool
	// overruns counts the kernel's drops of notifications (ENOBUFS)
	overruns atomic.Uint64
	errMu    sync.Mutex
	err      error
	done     chan struct{}
	once     sync.Once

	opTables   []TableRef // tables whose rule and chain messages events carry
	maxOpBytes int
	opsQueue   int
	opsB       opsBatch          // the current transaction's ops (run goroutine only)
	pool       *opPool           // released op memory (mem.go)
	names      map[string]string // the current transaction's names, interned
	txFirst    time.Time         // when the current transaction's first message was read (run goroutine only)
	stamp      *stamper          // kernel dating of datagrams (nil: dated by their read)
	stampErr   error             // why stamp is nil
	dated      [2]atomic.Uint64  // transactions dated by the kernel's stamp, by their read
	opsHint    map[TableRef]int  // ops the last transaction begun in a table carried (run goroutine only)
	holdReads  <-chan struct{}   // Options.holdReads
	commits    commitLog         // the last commits seen (CommittedAfter)
}

// Options tunes a Watcher; zero values mean the defaults.
type Options struct {
	// Events is how many transactions may wait for the reader (default 256).
	Events int
	// ReadBuffer is the socket receive buffer in bytes (default 32 MiB:
	// kube-proxy's full syncs send one message per map element, an
	// iptables sync one per rule of every chain it rewrites, twice).
	ReadBuffer int
	// OpTables are the tables whose rule and chain messages each event
	// carries in Ops (ops.go); none by default.
	OpTables []TableRef
	// MaxOpBytes bounds the rule bytes one event carries (default
	// DefaultMaxOpBytes); a larger transaction's event carries none.
	MaxOpBytes int

	// holdReads, when set, keeps the watcher from reading its socket until
	// it is closed: tests make the kernel overrun the socket with it (a
	// reader woken at every datagram may keep pace with a large commit).
	holdReads <-chan struct{}
	// OpsQueue: an event carries its ops only while fewer events than this
	// wait for the reader (default 8), so a reader that falls behind holds
	// at most OpsQueue events' rule bytes; later events name their chains
	// only.
	OpsQueue int
}

// Watch subscribes to nf_tables events in the named network namespace
// ("" for the caller's). The subscription ends when ctx is done or Close is
// called; then Events is closed.
func Watch(ctx context.Context, netns string) (*Watcher, error) {
	return WatchWith(ctx, netns, Options{})
}

// WatchWith is Watch with options.
func WatchWith(ctx context.Context, netns string, opts Options) (*Watcher, error) {
	if opts.Events <= 0 {
		opts.Events = 256
	}
	if opts.ReadBuffer <= 0 {
		opts.ReadBuffer = 32 << 20
	}
	var conn *netlink.Conn
	err := nsutil.WithFd(netns, func(fd int) error {
		c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: fd})
		if err != nil {
			return err
		}
		conn = c
		return nil
	})
	if err != nil {
		return nil, DialError(err)
	}
	setReadBuffer(conn, opts.ReadBuffer)
	if err := conn.JoinGroup(nfnlGroupNFTables); err != nil {
		conn.Close()
		return nil, fmt.Errorf("join NFNLGRP_NFTABLES: %w", err)
	}
	if opts.MaxOpBytes <= 0 {
		opts.MaxOpBytes = DefaultMaxOpBytes
	}
	if opts.OpsQueue <= 0 {
		opts.OpsQueue = 8
	}
	w := &Watcher{netns: netns, conn: conn, events: make(chan Event, opts.Events), done: make(chan struct{}),
		opTables: opts.OpTables, maxOpBytes: opts.MaxOpBytes, opsQueue: opts.OpsQueue,
		pool: newOpPool(), holdReads: opts.holdReads}
	// Subscribe first, then read the current generation, so nothing is missed.
	g, err := Generation(netns)
	if err != nil {
		conn.Close()
		return nil, err
	}
	w.gen.Store(g)
	w.stamp, w.stampErr = attachStamper(conn, g)
	go w.run()
	go func() {
		select {
		case <-ctx.Done():
			w.Close()
		case <-w.done:
		}
	}()
	return w, nil
}

// Events delivers one event per committed transaction. When the reader
// falls behind, events are dropped and the next one carries Lost.
func (w *Watcher) Events() <-chan Event { return w.events }

// Generation returns the last generation id seen: an O(1) "did anything
// change since I last read?" check.
func (w *Watcher) Generation() uint32 { return w.gen.Load() }

// Dating says how transactions are dated: by the kernel's stamp of their
// first datagram (kernel true; stamp.go) or by its read (err says
// why), with how many were dated each way.
func (w *Watcher) Dating() (kernel bool, stamped, read uint64, err error) {
	return w.stamp != nil, w.dated[0].Load(), w.dated[1].Load(), w.stampErr
}

// Overruns is how many times the kernel dropped notifications because the
// socket's receive buffer was full (ENOBUFS); each was reported to the
// reader as an event with Lost set.
func (w *Watcher) Overruns() uint64 { return w.overruns.Load() }

// Err returns the error that ended the subscription, if any.
func (w *Watcher) Err() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// Close ends the subscription.
func (w *Watcher) Close() error {
	var err error
	w.once.Do(func() {
		close(w.done)
		err = w.conn.Close()
	})
	return err
}

func (w *Watcher) run() {
	defer close(w.events)
	defer w.stamp.close() // here, not in Close: run may be using it
	var batch changeBatch
	if w.holdReads != nil {
		select {
		case <-w.holdReads:
		case <-w.done:
			return
		}
	}
	r, err := newDatagramReader(w.conn)
	if err != nil {
		w.fail(err)
		return
	}
	var at time.Time // when the datagram being handled was read
	handle := func(m netlink.Message) { w.handle(m, &batch, at) }
	for {
		b, err := r.read()
		at = time.Now()
		if err == nil {
			err = eachMessage(b, handle)
		}
		if err != nil {
			select {
			case <-w.done:
				return
			default:
			}
			if errors.Is(err, syscall.ENOBUFS) {
				w.overrun(&batch)
				continue
			}
			w.fail(err)
			return
		}
	}
}

// commitTime dates the transaction that ended with generation gen, whose
// first message was read at read: when the kernel queued its first
// datagram, by the stamp, or read.
func (w *Watcher) commitTime(gen uint32, read time.Time) time.Time {
	if t, ok := w.stamp.stamp(gen); ok && !t.After(read) {
		w.dated[0].Add(1)
		return t
	}
	w.dated[1].Add(1)
	return read
}

// fail records the error that ends the subscription.
func (w *Watcher) fail(err error) {
	w.errMu.Lock()
	w.err = err
	w.errMu.Unlock()
}

// overrun handles notifications the kernel dropped (socket buffer full):
// the partial batch is discarded and an event with Lost set is sent at once,
// carrying the current generation, so the reader re-reads everything.
func (w *Watcher) overrun(batch *changeBatch) {
	w.overruns.Add(1)
	batch.flush()
	w.opsB.reset(w.pool)
	w.opsB.overflow = true // the rest of this transaction is not all of it
	w.txFirst = time.Time{}
	ev := Event{Generation: w.gen.Load(), Lost: true, Received: time.Now()}
	if g, err := Generation(w.netns); err == nil {
		ev.Generation = g
		w.gen.Store(g)
	}
	w.commits.add(ev.Generation, ev.Received)
	w.lost.Store(false)
	select {
	case w.events <- ev:
	default:
		w.lost.Store(true)
	}
}

// handle takes one message read at at. The kernel queues a transaction's
// object messages and then its NEWGEN together at the commit, so the event
// is dated by the read of its first message: the NEWGEN's own read comes
// after the watcher has decoded all the others (in iptables-nft mode a
// large kube-proxy sync is tens of thousands of rule messages).
func (w *Watcher) handle(m netlink.Message, batch *changeBatch, at time.Time) {
	if w.names == nil {
		w.names = map[string]string{}
	}
	if w.txFirst.IsZero() {
		w.txFirst = at
	}
	item, gen, ok, err := parseChangeMessageIn(m, w.names)
	if err != nil || !ok {
		return
	}
	if gen == nil {
		batch.add(item)
		if len(w.opTables) > 0 {
			w.addOp(m, item)
		}
		return
	}
	w.gen.Store(gen.ID)
	w.names = nil
	ev := Event{
		Generation: gen.ID, PID: gen.PID, Process: gen.Process,
		Changes: batch.flush(), Lost: w.lost.Swap(false), Received: w.commitTime(gen.ID, w.txFirst),
	}
	w.txFirst = time.Time{}
	w.commits.add(ev.Generation, ev.Received)
	if n := len(w.opsB.ops); n > 0 {
		if w.opsHint == nil {
			w.opsHint = map[TableRef]int{}
		}
		w.opsHint[w.opsB.first] = n
	}
	if len(w.opTables) > 0 && len(w.events) < w.opsQueue {
		w.opsB.handOver(&ev, w.pool)
	}
	w.opsB.reset(w.pool)
	select {
	case w.events <- ev:
	default:
		w.lost.Store(true)
		ev.Release()
	}
}

// setReadBuffer sets the receive buffer past net.core.rmem_max when the
// process may (SO_RCVBUFFORCE, CAP_NET_ADMIN, which reading nf_tables
// needs anyway), else as far as rmem_max allows. The kernel takes memory
// for queued messages only: a large limit costs nothing while the reader
// keeps up, and an overrun costs a full read.
func setReadBuffer(c *netlink.Conn, n int) {
	if rc, err := c.SyscallConn(); err == nil {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
		}); err == nil && serr == nil {
			return
		}
	}
	_ = c.SetReadBuffer(n)
}
