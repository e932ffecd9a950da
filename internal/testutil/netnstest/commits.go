package netnstest

import (
	"sync"
	"testing"
	"time"
)

// Commits is a loop of nf_tables commits in a namespace (a table of its
// own created and deleted), for tests that need the ruleset generation to
// move while a read runs.
type Commits struct {
	tb    testing.TB
	begin chan struct{}
	wg    sync.WaitGroup
	n     int
}

// StartCommits starts committing in ns at once.
func StartCommits(tb testing.TB, ns string) *Commits {
	c := &Commits{tb: tb, begin: make(chan struct{})}
	c.wg.Add(1)
	go c.run(ns)
	return c
}

func (c *Commits) run(ns string) {
	defer c.wg.Done()
	begin := c.begin
	var until time.Time
	for i := 0; until.IsZero() || time.Now().Before(until); i++ {
		select {
		case <-begin:
			until, begin = time.Now().Add(60*time.Millisecond), nil
		default:
		}
		op := "add"
		if i%2 == 1 {
			op = "delete"
		}
		if out, err := Cmd(ns, "nft", op, "table", "ip", "nd-commits").CombinedOutput(); err != nil {
			c.tb.Errorf("nft %s table: %v: %s", op, err, out)
			return
		}
		c.n++
	}
}

// Begin lets the loop commit for 60 ms more, then end.
func (c *Commits) Begin() { close(c.begin) }

// Wait waits for the loop's end and returns how many commits it made.
func (c *Commits) Wait() int {
	c.wg.Wait()
	return c.n
}
