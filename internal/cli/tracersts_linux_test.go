package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/rst"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// streamLog records the complete lines written to stdout and stderr in the
// order they were written, and signals the first stderr line.
type streamLog struct {
	mu       sync.Mutex
	lines    []streamLine
	partial  map[string]*bytes.Buffer
	attached chan struct{}
}

type streamLine struct{ stream, text string }

func newStreamLog() *streamLog {
	return &streamLog{partial: map[string]*bytes.Buffer{}, attached: make(chan struct{})}
}

type streamWriter struct {
	l      *streamLog
	stream string
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	b := w.l.partial[w.stream]
	if b == nil {
		b = &bytes.Buffer{}
		w.l.partial[w.stream] = b
	}
	b.Write(p)
	for {
		line, err := b.ReadString('\n')
		if err != nil {
			b.WriteString(line) // incomplete: keep
			break
		}
		w.l.lines = append(w.l.lines, streamLine{w.stream, strings.TrimSuffix(line, "\n")})
		if w.stream == "stderr" && strings.Contains(line, "rst probe attached") {
			close(w.l.attached)
		}
	}
	return len(p), nil
}

func (l *streamLog) snapshot() []streamLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]streamLine(nil), l.lines...)
}

// loopbackPair is a network namespace whose loopback holds a "server" and
// a "client" address: a connection from the client to a closed port of
// the server is refused with one RST sent by the server.
type loopbackPair struct {
	ns             netns.NsHandle
	server, client netip.Addr
}

func newLoopbackPair(t *testing.T) loopbackPair {
	t.Helper()
	name := netnstest.Add(t, fmt.Sprintf("nd-cliio-%d", os.Getpid()))
	k := byte(os.Getpid() % 250)
	p := loopbackPair{server: netip.AddrFrom4([4]byte{198, 19, k, 1}), client: netip.AddrFrom4([4]byte{198, 19, k, 2})}
	for _, args := range [][]string{{"link", "set", "lo", "up"},
		{"addr", "add", p.server.String() + "/32", "dev", "lo"}, {"addr", "add", p.client.String() + "/32", "dev", "lo"}} {
		netnstest.Run(t, name, append([]string{"ip"}, args...)...)
	}
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	p.ns = h
	return p
}

// refuse makes n connection attempts from the client to the server's
// port, each of which must be refused.
func (p loopbackPair) refuse(t *testing.T, port uint16, n int) {
	t.Helper()
	err := netnstest.Do(p.ns, func() error {
		for i := range n {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			err = unix.Bind(fd, &unix.SockaddrInet4{Addr: p.client.As4()})
			if err == nil {
				err = unix.Connect(fd, &unix.SockaddrInet4{Addr: p.server.As4(), Port: int(port)})
			}
			unix.Close(fd)
			if err != unix.ECONNREFUSED {
				return fmt.Errorf("attempt %d to %s:%d: %v, want connection refused", i, p.server, port, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// requireProbe skips when the kernel cannot run the RST probe, saying why.
func requireProbe(t *testing.T) {
	t.Helper()
	netnstest.RequireRoot(t, "loads the eBPF RST probe and creates a network namespace")
	p, err := rst.Load(rst.Config{NoEvents: true})
	p.Close()
	if err != nil {
		t.Skipf("the kernel cannot run the RST probe (needs BTF with the tcp_send_reset tracepoint, or fentry): %v", err)
	}
}

// runTraceUntil runs trace-rsts with args, runs act once it says it is
// attached, waits until ready holds for the log (bounded), then stops it
// as a user does, with Ctrl-C (SIGINT, which the command handles).
func runTraceUntil(t *testing.T, args []string, act func(), ready func([]streamLine) bool) ([]streamLine, int) {
	t.Helper()
	log := newStreamLog()
	done := make(chan int, 1)
	go func() {
		code, _ := Run(Env{}, append([]string{"trace-rsts"}, args...), streamWriter{log, "stdout"}, streamWriter{log, "stderr"})
		done <- code
	}()
	select {
	case <-log.attached:
	case code := <-done:
		t.Fatalf("trace-rsts ended (exit %d) before saying it was attached: %q", code, log.snapshot())
	case <-time.After(60 * time.Second):
		t.Fatalf("trace-rsts did not say it was attached within 60s: %q", log.snapshot())
	}
	act()
	for deadline := time.Now().Add(20 * time.Second); !ready(log.snapshot()) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	// Only after the attach line and before the trace ends (its duration is
	// an hour), so SIGINT reaches the command's handler.
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		return log.snapshot(), code
	case <-time.After(30 * time.Second):
		t.Fatalf("trace-rsts did not stop on SIGINT: %q", log.snapshot())
	}
	return nil, 0
}

func countStream(lines []streamLine, stream string, re *regexp.Regexp) int {
	n := 0
	for _, l := range lines {
		if l.stream == stream && re.MatchString(l.text) {
			n++
		}
	}
	return n
}

// TestTraceRSTsWatchRealKernel: trace-rsts --watch on the real probe. It
// says on stderr when it is attached; resets before that are not counted;
// after it, each reset on the watched port is one line, with the time,
// "sent", the server's and the client's addresses, printed after the
// attach line; the counts at the end are those resets alone.
func TestTraceRSTsWatchRealKernel(t *testing.T) {
	requireProbe(t)
	p := newLoopbackPair(t)
	p.refuse(t, 5432, 3) // before the trace: cannot be counted
	eventRe := regexp.MustCompile(`^(\S+Z)\s+sent\s+` + regexp.QuoteMeta(p.server.String()) + `:5432 -> ` +
		regexp.QuoteMeta(p.client.String()) + `:\d+\s+\S+$`)
	args := []string{"--ip", p.server.String(), "--port", "5432", "--duration", "1h", "--watch"}
	lines, code := runTraceUntil(t, args, func() {
		p.refuse(t, 5432, 5)
		p.refuse(t, 5433, 2) // another port: neither counted nor shown
	}, func(ls []streamLine) bool { return countStream(ls, "stdout", eventRe) >= 5 })
	if code != ExitOK {
		t.Fatalf("exit %d: %q", code, lines)
	}
	attachAt, firstEvent := -1, -1
	var attachTime time.Time
	attachRe := regexp.MustCompile(`^(\S+Z) rst probe attached \(mode [a-z_]+\): counting RSTs for ` + regexp.QuoteMeta(p.server.String()) +
		` on port 5432 from now on; resets before this line are not counted\. Start the reproduction now; Ctrl-C stops \(else after 1h\)\.$`)
	events := 0
	for i, l := range lines {
		if l.stream == "stderr" {
			m := attachRe.FindStringSubmatch(l.text)
			if m == nil || attachAt >= 0 {
				t.Errorf("stderr line %q: want exactly one attach line", l.text)
				continue
			}
			attachAt = i
			var err error
			if attachTime, err = time.Parse(time.RFC3339, m[1]); err != nil {
				t.Errorf("attach time %q: %v", m[1], err)
			}
			continue
		}
		m := eventRe.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		events++
		if firstEvent < 0 {
			firstEvent = i
		}
		if at, err := time.Parse(time.RFC3339, m[1]); err != nil || at.Before(attachTime) {
			t.Errorf("event %q: time %v before the attach line's %s", l.text, err, attachTime)
		}
	}
	if attachAt < 0 || firstEvent < attachAt {
		t.Errorf("attach line at %d, first event at %d: the attach line must come first: %q", attachAt, firstEvent, lines)
	}
	if events != 5 {
		t.Errorf("%d event lines, want one per reset after the attach line (5): %q", events, lines)
	}
	countRe := regexp.MustCompile(`^` + regexp.QuoteMeta(p.server.String()) + `\s+5\s+5\s+0$`)
	if countStream(lines, "stdout", countRe) != 1 || countStream(lines, "stdout", regexp.MustCompile(`^events: 5 shown, 0 not sampled`)) != 1 {
		t.Errorf("want the counts 5 sent (not the 3 before attaching nor the 2 on port 5433) and 5 events shown: %q", lines)
	}
}

// TestTraceRSTsWatchJSONRealKernel: with -o json, --watch prints one JSON
// object per line: one per reset, then the totals.
func TestTraceRSTsWatchJSONRealKernel(t *testing.T) {
	requireProbe(t)
	p := newLoopbackPair(t)
	args := []string{"--ip", p.server.String(), "--duration", "1h", "--watch", "-o", "json"}
	lines, code := runTraceUntil(t, args, func() { p.refuse(t, 7000, 2) },
		func(ls []streamLine) bool {
			return countStream(ls, "stdout", regexp.MustCompile(`"kind":"rst"`)) >= 2
		})
	if code != ExitOK {
		t.Fatalf("exit %d: %q", code, lines)
	}
	var kinds []string
	var totals traceReport
	for _, l := range lines {
		if l.stream != "stdout" {
			continue
		}
		var ev traceEvent
		if err := json.Unmarshal([]byte(l.text), &ev); err != nil {
			t.Fatalf("stdout line %q is no JSON object: %v", l.text, err)
		}
		kinds = append(kinds, ev.Kind)
		switch ev.Kind {
		case "rst":
			from, to := netip.MustParseAddrPort(ev.From), netip.MustParseAddrPort(ev.To)
			if from != netip.AddrPortFrom(p.server, 7000) || to.Addr() != p.client || ev.Direction != "sent_by_watched" || ev.Time.IsZero() {
				t.Errorf("event %q", l.text)
			}
		case "totals":
			if err := json.Unmarshal([]byte(l.text), &totals); err != nil {
				t.Fatal(err)
			}
		}
	}
	if strings.Join(kinds, ",") != "rst,rst,totals" {
		t.Errorf("JSON Lines %v, want rst, rst, totals", kinds)
	}
	if totals.Counts[p.server.String()] != 2 || totals.Events == nil || totals.Events.Delivered != 2 || totals.Started.IsZero() {
		t.Errorf("totals %+v", totals)
	}
}
