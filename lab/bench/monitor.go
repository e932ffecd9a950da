package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The kernel-side reference for lag precision: `nft monitor` in the lab
// node's namespace prints every nf_tables notification, each transaction's
// object events followed by its "# new generation N by process P (name)"
// line (the NEWGEN message the agent dates its T2 by). The harness stamps
// each generation line with time.Now() as it reads it, so the reference is
// the commit's multicast plus the monitor's own wake-up, formatting and pipe
// latency, and none of kube-proxy's post-commit work.
//
// nft monitor has no filter that keeps the generation lines (`nft monitor
// new`, `ruleset`, ... print objects only), so it runs unfiltered and the
// harness parses the object lines only for the family and table they name.

// monitorMatchWindow bounds |T2 - commit| for a sample to be matched to a
// commit. kube-proxy's IPv4 proxier commits at most once a second (default
// minimum sync period 1 s), so ±50 ms cannot pick a neighbouring commit of
// that proxier, and it is 2.5x the 20 ms precision goal: an agent error
// beyond it is counted as unmatched rather than hidden.
const monitorMatchWindow = 50 * time.Millisecond

// Commit is one nf_tables transaction as nft monitor printed it.
type Commit struct {
	Gen     uint32
	PID     int       // -1 when the line names no process
	Process string    // the committing process's comm (15 characters at most)
	At      time.Time // when the harness read the generation line
	// First is when it read the transaction's first line (At when the
	// generation line came alone): At - First is nft's time printing the
	// transaction's events, all delivered with the NEWGEN at the commit.
	First time.Time
	// Tables are the "family table" pairs the transaction's object events
	// named, in the order first seen.
	Tables []string
}

// Touches reports whether the commit named one of tables.
func (c Commit) Touches(tables []string) bool {
	for _, t := range c.Tables {
		for _, w := range tables {
			if t == w {
				return true
			}
		}
	}
	return false
}

const genPrefix = "# new generation "

// ParseGenLine reads "# new generation N by process P (name)" (or "# new
// generation N" when the kernel names no process). ok is false for any
// other line; a generation line that cannot be read is an error.
func ParseGenLine(line string) (gen uint32, pid int, name string, ok bool, err error) {
	line = strings.TrimRight(line, "\r\n ")
	if !strings.HasPrefix(line, genPrefix) {
		return 0, 0, "", false, nil
	}
	rest := line[len(genPrefix):]
	num, tail, _ := strings.Cut(rest, " ")
	g, err := strconv.ParseUint(num, 10, 32)
	if err != nil {
		return 0, 0, "", false, fmt.Errorf("generation line %q: %w", line, err)
	}
	if tail == "" {
		return uint32(g), -1, "", true, nil
	}
	after, found := strings.CutPrefix(tail, "by process ")
	if !found {
		return 0, 0, "", false, fmt.Errorf("generation line %q: want \"by process P (name)\"", line)
	}
	p, nm, _ := strings.Cut(after, " ")
	pn, err := strconv.Atoi(p)
	if err != nil {
		return 0, 0, "", false, fmt.Errorf("generation line %q: process: %w", line, err)
	}
	// The name is between the first "(" and the last ")": a comm may hold
	// spaces and parentheses itself.
	if nm != "" {
		if !strings.HasPrefix(nm, "(") || !strings.HasSuffix(nm, ")") {
			return 0, 0, "", false, fmt.Errorf("generation line %q: process name not in parentheses", line)
		}
		nm = nm[1 : len(nm)-1]
	}
	return uint32(g), pn, nm, true, nil
}

var nftFamilies = map[string]bool{"ip": true, "ip6": true, "inet": true, "arp": true, "bridge": true, "netdev": true}

var monitorVerbs = map[string]bool{"add": true, "create": true, "delete": true, "destroy": true, "replace": true, "flush": true, "reset": true}

// EventTable returns the "family table" an nft monitor object event names
// ("add element ip kube-proxy service-ips { ... }" -> "ip kube-proxy");
// ok is false for lines that are not object events.
func EventTable(line string) (string, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !monitorVerbs[f[0]] || !nftFamilies[f[2]] {
		return "", false
	}
	return f[2] + " " + f[3], true
}

// scanMonitor reads nft monitor output, stamping each line with now() as it
// is read, and hands each transaction to add. Object events are attributed
// to the next generation line. It returns the lines read and the
// reader's error (nil at EOF).
func scanMonitor(r io.Reader, now func() time.Time, add func(Commit)) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var tables []string
	var first time.Time
	lines := 0
	for sc.Scan() {
		at := now()
		line := sc.Text()
		lines++
		g, pid, name, ok, err := ParseGenLine(line)
		if ok {
			if first.IsZero() {
				first = at
			}
			add(Commit{Gen: g, PID: pid, Process: name, At: at, First: first, Tables: tables})
			tables, first = nil, time.Time{}
			continue
		}
		if first.IsZero() {
			first = at
		}
		if err != nil {
			continue // counted as a line, attributed to nothing
		}
		if t, ok := EventTable(line); ok {
			seen := false
			for _, x := range tables {
				if x == t {
					seen = true
					break
				}
			}
			if !seen {
				tables = append(tables, t)
			}
		}
	}
	return lines, sc.Err()
}

// MatchCommit returns the commit of cs that touched one of tables and was
// read nearest to t2, within ±win (inclusive). Nearness is to the span the
// monitor took reading the transaction (First to At; zero inside it), so
// a large transaction's printing time (hundreds of ms at 10k+ endpoints in
// iptables-nft mode) does not push its commit out of the window. ok is
// false when none is.
func MatchCommit(cs []Commit, t2 time.Time, win time.Duration, tables []string) (Commit, bool) {
	var best Commit
	bestD := time.Duration(math.MaxInt64)
	for _, c := range cs {
		d := spanDist(t2, c.First, c.At)
		if d > win || d >= bestD || !c.Touches(tables) {
			continue
		}
		best, bestD = c, d
	}
	return best, bestD != time.Duration(math.MaxInt64)
}

// spanDist is how far t2 is from [first, at] (first zero: at).
func spanDist(t2, first, at time.Time) time.Duration {
	if first.IsZero() || first.After(at) {
		first = at
	}
	switch {
	case t2.Before(first):
		return first.Sub(t2)
	case t2.After(at):
		return t2.Sub(at)
	}
	return 0
}

// MonitorMatch is the lag precision of one window's samples against the
// monitor's commits.
type MonitorMatch struct {
	Diffs     []time.Duration // |T2 - commit read|, one per matched sample
	Unmatched int             // samples with no commit within the window
	T2After   int             // matched samples whose T2 is at or after the monitor's reading
	Spans     []time.Duration // the matched commits' At - First (nft printing their events)
	FromFirst []time.Duration // |T2 - First|: against the read of the transaction's first line
}

// MatchSamples matches each T2 to its commit (MatchCommit).
func MatchSamples(t2s []time.Time, cs []Commit, win time.Duration, tables []string) MonitorMatch {
	var m MonitorMatch
	for _, t2 := range t2s {
		c, ok := MatchCommit(cs, t2, win, tables)
		if !ok {
			m.Unmatched++
			continue
		}
		d := t2.Sub(c.At)
		if d >= 0 {
			m.T2After++
		}
		m.Diffs = append(m.Diffs, absDur(d))
		first := c.First
		if first.IsZero() {
			first = c.At
		}
		m.Spans = append(m.Spans, c.At.Sub(first))
		m.FromFirst = append(m.FromFirst, absDur(t2.Sub(first)))
	}
	return m
}

// ProxyTables are the IPv4 tables in which kube-proxy programs an endpoint
// change in mode (nil: no nf_tables, iptables-legacy): the commits a sample
// may be matched to. Its IPv6 proxier's commits (same process names) are
// left out by table. In iptables-nft mode iptables-nft-restore commits each
// table of a sync on its own, filter then nat; the churn's changes (an
// endpoint address replaced) are programmed in nat's KUBE-SVC/KUBE-SEP
// chains, so the filter commit of the same sync is not a candidate.
func ProxyTables(mode string) []string {
	switch mode {
	case "nftables":
		return []string{"ip kube-proxy"}
	case "iptables-nft":
		return []string{"ip nat"}
	}
	return nil
}

// Monitor is a running `nft monitor` in a network namespace.
type Monitor struct {
	cmd    *exec.Cmd
	stdout io.ReadCloser
	done   chan struct{} // closed when the reader has returned

	mu      sync.Mutex
	commits []Commit
	lines   int
	readErr error
	stderr  limitedBuffer
}

// StartMonitor starts `ip netns exec ns nft monitor` (ip execs nft in the
// namespace: the PID is nft's) and reads it in a goroutine. The caller must
// Stop it. The child is killed if the harness dies (Pdeathsig).
func StartMonitor(ctx context.Context, ns string) (*Monitor, error) {
	m := &Monitor{done: make(chan struct{})}
	m.stderr.max = 8 << 10
	m.cmd = exec.CommandContext(ctx, "ip", "netns", "exec", ns, "nft", "monitor")
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	m.cmd.Stderr = &m.stderr
	var err error
	if m.stdout, err = m.cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("nft monitor: %w", err)
	}
	go func() {
		defer close(m.done)
		n, err := scanMonitor(m.stdout, time.Now, func(c Commit) {
			m.mu.Lock()
			m.commits = append(m.commits, c)
			m.mu.Unlock()
		})
		m.mu.Lock()
		m.lines, m.readErr = n, err
		m.mu.Unlock()
	}()
	return m, nil
}

// PID is nft's.
func (m *Monitor) PID() int { return m.cmd.Process.Pid }

// Commits returns the commits read so far, in reading order.
func (m *Monitor) Commits() []Commit {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Commit(nil), m.commits...)
}

// Exited reports whether the monitor's output has ended (nft exited).
func (m *Monitor) Exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// WaitSettled waits until the monitor has filled its cache (nft lists the
// ruleset before it prints events: seconds of CPU at 100k endpoints): its
// CPU time unchanged over 300 ms, at least 500 ms after the start.
func (m *Monitor) WaitSettled(ctx context.Context, timeout time.Duration) error {
	start := time.Now()
	var last time.Duration = -1
	for time.Since(start) < timeout {
		if m.Exited() {
			return fmt.Errorf("nft monitor exited: %s", strings.TrimSpace(m.stderr.String()))
		}
		c, err := ReadCPU(m.PID())
		if err != nil {
			return err
		}
		if c.Total() == last && time.Since(start) >= 500*time.Millisecond {
			return nil
		}
		last = c.Total()
		sleepCtx(ctx, 300*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("nft monitor still busy after %s", timeout)
}

// MonitorStats is what a stopped monitor reports.
type MonitorStats struct {
	Lines   int
	Commits int
	CPU     time.Duration // rusage of nft (and ip before its exec)
	Stderr  string
	Err     error // exited early or unreadable output
}

// Stop kills the monitor, waits for its reader and reaps it. Safe to call
// once; the caller calls it on every path.
func (m *Monitor) Stop() MonitorStats {
	var st MonitorStats
	early := m.Exited()
	_ = m.cmd.Process.Kill()
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		// The pipe should have ended with nft; Wait closes it.
	}
	werr := m.cmd.Wait()
	<-m.done
	if ru, ok := m.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		st.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st.Lines, st.Commits, st.Stderr = m.lines, len(m.commits), strings.TrimSpace(m.stderr.String())
	if early {
		st.Err = fmt.Errorf("nft monitor exited before it was stopped: %v", werr)
	}
	if m.readErr != nil && !errors.Is(m.readErr, io.ErrClosedPipe) {
		st.Err = errors.Join(st.Err, fmt.Errorf("reading nft monitor: %w", m.readErr))
	}
	return st
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
