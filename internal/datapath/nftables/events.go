package nftables

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
	"golang.org/x/sys/unix"
)

// ChangeWatcher follows nf_tables change notifications (netlink group
// NFNLGRP_NFTABLES) in one network namespace. It only listens: it never
// sends a request that changes anything. Events are hints (docs/architecture.md,
// "The reader contract"): on an event, re-read what it names.
type ChangeWatcher struct {
	netns  string
	conn   *netlink.Conn
	events chan ChangeEvent
	gen    atomic.Uint32
	lost   atomic.Bool
	errMu  sync.Mutex
	err    error
	done   chan struct{}
	once   sync.Once

	opTables   []TableRef // tables whose rule and chain messages events carry
	maxOpBytes int
	opsQueue   int
	opsB       opsBatch          // the current transaction's ops (run goroutine only)
	pool       *opPool           // released op memory (events_mem.go)
	names      map[string]string // the current transaction's names, interned
	txFirst    time.Time         // when the current transaction's first message was read (run goroutine only)
	stamp      *stamper          // kernel dating of datagrams (nil: dated by their read)
	stampErr   error             // why stamp is nil
	dated      [2]atomic.Uint64  // transactions dated by the kernel's stamp, by their read
	opsHint    map[TableRef]int  // ops the last transaction begun in a table carried (run goroutine only)
	holdReads  <-chan struct{}   // WatchOptions.holdReads
}

// WatchOptions tunes a ChangeWatcher; zero values mean the defaults.
type WatchOptions struct {
	// Events is how many transactions may wait for the reader (default 256).
	Events int
	// ReadBuffer is the socket receive buffer in bytes (default 32 MiB:
	// kube-proxy's full syncs send one message per map element, an
	// iptables sync one per rule of every chain it rewrites, twice).
	ReadBuffer int
	// OpTables are the tables whose rule and chain messages each event
	// carries in Ops (events_ops.go); none by default.
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

// WatchChanges subscribes to nf_tables events in the named network namespace
// ("" for the caller's). The subscription ends when ctx is done or Close is
// called; then Events is closed.
func WatchChanges(ctx context.Context, netns string) (*ChangeWatcher, error) {
	return WatchChangesWith(ctx, netns, WatchOptions{})
}

// WatchChangesWith is WatchChanges with options.
func WatchChangesWith(ctx context.Context, netns string, opts WatchOptions) (*ChangeWatcher, error) {
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
		return nil, nftDialError(err)
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
	w := &ChangeWatcher{netns: netns, conn: conn, events: make(chan ChangeEvent, opts.Events), done: make(chan struct{}),
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
func (w *ChangeWatcher) Events() <-chan ChangeEvent { return w.events }

// Generation returns the last generation id seen: an O(1) "did anything
// change since I last read?" check.
func (w *ChangeWatcher) Generation() uint32 { return w.gen.Load() }

// Dating says how transactions are dated: by the kernel's stamp of their
// first datagram (kernel true; events_stamp.go) or by its read (err says
// why), with how many were dated each way.
func (w *ChangeWatcher) Dating() (kernel bool, stamped, read uint64, err error) {
	return w.stamp != nil, w.dated[0].Load(), w.dated[1].Load(), w.stampErr
}

// Err returns the error that ended the subscription, if any.
func (w *ChangeWatcher) Err() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// Close ends the subscription.
func (w *ChangeWatcher) Close() error {
	var err error
	w.once.Do(func() {
		close(w.done)
		err = w.conn.Close()
	})
	return err
}

func (w *ChangeWatcher) run() {
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
func (w *ChangeWatcher) commitTime(gen uint32, read time.Time) time.Time {
	if t, ok := w.stamp.stamp(gen); ok && !t.After(read) {
		w.dated[0].Add(1)
		return t
	}
	w.dated[1].Add(1)
	return read
}

// fail records the error that ends the subscription.
func (w *ChangeWatcher) fail(err error) {
	w.errMu.Lock()
	w.err = err
	w.errMu.Unlock()
}

// overrun handles notifications the kernel dropped (socket buffer full):
// the partial batch is discarded and an event with Lost set is sent at once,
// carrying the current generation, so the reader re-reads everything.
func (w *ChangeWatcher) overrun(batch *changeBatch) {
	batch.flush()
	w.opsB.reset(w.pool)
	w.opsB.overflow = true // the rest of this transaction is not all of it
	w.txFirst = time.Time{}
	ev := ChangeEvent{Generation: w.gen.Load(), Lost: true, Received: time.Now()}
	if g, err := Generation(w.netns); err == nil {
		ev.Generation = g
		w.gen.Store(g)
	}
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
// kube-proxy sync at 100k endpoints is some 22,000 rule messages).
func (w *ChangeWatcher) handle(m netlink.Message, batch *changeBatch, at time.Time) {
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
	ev := ChangeEvent{
		Generation: gen.ID, PID: gen.PID, Process: gen.Process,
		Changes: batch.flush(), Lost: w.lost.Swap(false), Received: w.commitTime(gen.ID, w.txFirst),
	}
	w.txFirst = time.Time{}
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
// owned), so a socket closed per poll waits for any batch being committed:
// hundreds of milliseconds during a large kube-proxy sync. The zero value
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
			return nftDialError(err)
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

// nftDialError marks a kernel without nf_tables as unsupported.
func nftDialError(err error) error {
	if errors.Is(err, syscall.EPROTONOSUPPORT) || errors.Is(err, syscall.EAFNOSUPPORT) {
		return fmt.Errorf("%w: nf_tables netlink: %v", model.ErrUnsupported, err)
	}
	return err
}
