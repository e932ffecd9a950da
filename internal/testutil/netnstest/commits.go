package netnstest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
)

// Commits is a loop of nf_tables commits in a namespace (a table of its
// own created and deleted), for tests that need the ruleset generation to
// move while a read runs.
type Commits struct {
	tb       testing.TB
	begin    chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	n        atomic.Int64
	spans    []CommitSpan // the loop's; read after wg.Wait
}

// CommitsOptions changes how StartCommitsWith commits.
type CommitsOptions struct {
	// Netlink commits from this process over an nf_tables socket in the
	// namespace instead of running nft (a process per commit): a commit
	// then takes far less time than a process start, so the
	// generation moves all through even a short read.
	Netlink bool
	// Pause is a wait after each commit (a netlink loop without one keeps
	// a CPU busy).
	Pause time.Duration
	// Delay is a wait before the first commit (a read can begin on a
	// generation that then moves under it).
	Delay time.Duration
}

// CommitSpan is one commit: it landed (the generation moved) at some time
// between Start and End.
type CommitSpan struct{ Start, End time.Time }

// StartCommits starts committing in ns at once, by running nft. The loop
// commits until 60 ms after Begin, or until Stop; the test's cleanup stops
// it if it still runs.
func StartCommits(tb testing.TB, ns string) *Commits {
	return StartCommitsWith(tb, ns, CommitsOptions{})
}

// StartCommitsWith is StartCommits with options.
func StartCommitsWith(tb testing.TB, ns string, o CommitsOptions) *Commits {
	tb.Helper()
	c := &Commits{tb: tb, begin: make(chan struct{}), stop: make(chan struct{})}
	commit := nftCommit(ns)
	done := func() {}
	if o.Netlink {
		var err error
		if commit, done, err = netlinkCommit(ns); err != nil {
			tb.Fatalf("commits in netns %s: %v", ns, err)
		}
	}
	c.wg.Add(1)
	go c.run(commit, done, o.Pause, o.Delay)
	tb.Cleanup(func() { c.Stop() })
	return c
}

// nftCommit commits by running nft in ns.
func nftCommit(ns string) func(add bool) error {
	return func(add bool) error {
		op := "add"
		if !add {
			op = "delete"
		}
		if out, err := Cmd(ns, "nft", op, "table", "ip", "nd-commits").CombinedOutput(); err != nil {
			return fmt.Errorf("nft %s table: %v: %s", op, err, out)
		}
		return nil
	}
}

// netlinkCommit commits over an nf_tables socket opened in ns.
func netlinkCommit(ns string) (commit func(add bool) error, done func(), err error) {
	h, err := netns.GetFromName(ns)
	if err != nil {
		return nil, nil, err
	}
	defer h.Close() // the socket stays in ns
	conn, err := nftables.New(nftables.WithNetNSFd(int(h)), nftables.AsLasting())
	if err != nil {
		return nil, nil, fmt.Errorf("nf_tables netlink: %w", err)
	}
	t := &nftables.Table{Name: "nd-commits", Family: nftables.TableFamilyIPv4}
	commit = func(add bool) error {
		op := "add"
		if add {
			conn.AddTable(t)
		} else {
			op = "delete"
			conn.DelTable(t)
		}
		if err := conn.Flush(); err != nil {
			return fmt.Errorf("nf_tables %s table: %w", op, err)
		}
		return nil
	}
	return commit, func() { _ = conn.CloseLasting() }, nil
}

func (c *Commits) run(commit func(add bool) error, done func(), pause, delay time.Duration) {
	defer c.wg.Done()
	defer done()
	if delay > 0 {
		select {
		case <-c.stop:
			return
		case <-time.After(delay):
		}
	}
	begin := c.begin
	var until time.Time
	for i := 0; until.IsZero() || time.Now().Before(until); i++ {
		select {
		case <-c.stop:
			return
		case <-begin:
			until, begin = time.Now().Add(60*time.Millisecond), nil
		default:
		}
		start := time.Now()
		if err := commit(i%2 == 0); err != nil {
			c.tb.Errorf("%v", err)
			return
		}
		c.spans = append(c.spans, CommitSpan{Start: start, End: time.Now()})
		c.n.Add(1)
		if pause > 0 {
			time.Sleep(pause)
		}
	}
}

// Begin lets the loop commit for 60 ms more, then end.
func (c *Commits) Begin() { close(c.begin) }

// Wait waits for the loop's end and returns how many commits it made.
func (c *Commits) Wait() int {
	c.wg.Wait()
	return int(c.n.Load())
}

// Stop ends the loop now (after the commit under way) and returns how many
// commits it made. Without Begin the loop commits until Stop.
func (c *Commits) Stop() int {
	c.stopOnce.Do(func() { close(c.stop) })
	return c.Wait()
}

// Count returns how many commits the loop made so far.
func (c *Commits) Count() int { return int(c.n.Load()) }

// Spans returns the loop's commits, in order; call it after Wait or Stop.
func (c *Commits) Spans() []CommitSpan {
	c.wg.Wait()
	return c.spans
}

// MaxQuiet returns the longest stretch of time within [from, to] that may
// hold no commit: any longer stretch in it holds the whole span of one, so
// a read that lasted longer saw the generation move. Call it after Wait or
// Stop.
func (c *Commits) MaxQuiet(from, to time.Time) time.Duration {
	spans := c.Spans()
	// A stretch starting at a is sure to hold a commit once it reaches the
	// end of the first commit that started after a: the longest quiet
	// stretches start at from or just after a commit's start.
	quiet := func(a time.Time, next int) time.Duration {
		end := to
		if next < len(spans) && spans[next].End.Before(to) {
			end = spans[next].End
		}
		return end.Sub(a)
	}
	k := 0
	for k < len(spans) && spans[k].Start.Before(from) {
		k++
	}
	longest := quiet(from, k)
	for i := k; i < len(spans) && spans[i].Start.Before(to); i++ {
		longest = max(longest, quiet(spans[i].Start, i+1))
	}
	return longest
}
