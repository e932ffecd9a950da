package scenarios

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"
)

// DialFunc opens a connection (e.g. from inside a node's namespace).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Counts is what one client saw.
type Counts struct {
	OK      int
	Refused int // ECONNREFUSED: an RST answered the SYN
	Other   int // timeouts, unreachable, ...
	// Aborted are attempts the end of the run cut short: their SYN may
	// have been answered by an RST the kernel (and the agent) saw, after
	// the client stopped waiting. A count of RSTs may exceed Refused by
	// at most Aborted.
	Aborted int
	// FirstOther is an example of the other errors, for the log.
	FirstOther string
	// RefusedAt are the times of the refused attempts.
	RefusedAt []time.Time
}

func (c *Counts) add(o Counts) {
	c.OK += o.OK
	c.Refused += o.Refused
	c.Other += o.Other
	c.Aborted += o.Aborted
	if c.FirstOther == "" {
		c.FirstOther = o.FirstOther
	}
	c.RefusedAt = append(c.RefusedAt, o.RefusedAt...)
}

func (c Counts) String() string {
	s := fmt.Sprintf("ok %d, refused %d, other errors %d, aborted by the stop %d", c.OK, c.Refused, c.Other, c.Aborted)
	if c.FirstOther != "" {
		s += " (e.g. " + c.FirstOther + ")"
	}
	return s
}

// Client connects to Addr in a loop (connect, then close at once) and counts
// the outcomes, until its context ends.
type Client struct {
	Name     string
	Dial     DialFunc
	Addr     string
	Interval time.Duration // pause between attempts
	Timeout  time.Duration // per attempt

	mu     sync.Mutex
	counts Counts
}

// Run loops until ctx is done.
func (c *Client) Run(ctx context.Context) {
	for ctx.Err() == nil {
		c.once(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(c.Interval):
		}
	}
}

func (c *Client) once(ctx context.Context) {
	dctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	conn, err := c.Dial(dctx, "tcp", c.Addr)
	at := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctx.Err() != nil && !errors.Is(err, syscall.ECONNREFUSED) {
		// The run ended during the attempt: not an outcome (a refusal that
		// came before the stop still counts as one).
		if conn != nil {
			conn.Close()
		}
		c.counts.Aborted++
		return
	}
	switch {
	case err == nil:
		conn.Close()
		c.counts.OK++
	case errors.Is(err, syscall.ECONNREFUSED):
		c.counts.Refused++
		c.counts.RefusedAt = append(c.counts.RefusedAt, at)
	default:
		c.counts.Other++
		if c.counts.FirstOther == "" {
			c.counts.FirstOther = err.Error()
		}
	}
}

// Counts returns what the client saw so far.
func (c *Client) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	out.RefusedAt = append([]time.Time(nil), c.counts.RefusedAt...)
	return out
}

// Fleet runs clients together.
type Fleet struct {
	Clients []*Client
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Start runs every client until Stop.
func (f *Fleet) Start(ctx context.Context) {
	ctx, f.cancel = context.WithCancel(ctx)
	for _, c := range f.Clients {
		f.wg.Add(1)
		go func() { defer f.wg.Done(); c.Run(ctx) }()
	}
}

// Stop ends the clients and returns the totals and the per-client counts.
func (f *Fleet) Stop() (Counts, map[string]Counts) {
	f.cancel()
	f.wg.Wait()
	var total Counts
	per := map[string]Counts{}
	for _, c := range f.Clients {
		cc := c.Counts()
		per[c.Name] = cc
		total.add(cc)
	}
	return total, per
}
