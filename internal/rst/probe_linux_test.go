package rst

import (
	"context"
	"net/netip"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// loadProbe loads the probe in mode (or auto) and closes it at cleanup.
func loadProbe(t *testing.T, mode Mode) *Probe {
	t.Helper()
	requireRoot(t)
	ensureTracefs(t)
	p, err := Load(Config{Mode: mode})
	if err != nil {
		t.Fatalf("load (mode %q): %v", mode, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if mode != "" && p.Mode() != mode {
		t.Fatalf("mode = %s, want %s", p.Mode(), mode)
	}
	t.Logf("probe status: %+v", p.Status())
	return p
}

func mustWatch(t *testing.T, p *Probe, ips ...netip.Addr) {
	t.Helper()
	for _, ip := range ips {
		if err := p.Watch(ip); err != nil {
			t.Fatal(err)
		}
	}
}

func counts(t *testing.T, p *Probe) map[netip.Addr]Counts {
	t.Helper()
	c, err := p.Counts()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// exactCounts is the core scenario: a pod namespace with no listener on a
// port, a client making exactly n connection attempts to it.
func exactCounts(t *testing.T, mode Mode) {
	p := loadProbe(t, mode)
	pr := newPair(t)
	spare4 := netip.MustParseAddr("198.19.255.254")
	mustWatch(t, p, pr.pod4, pr.pod6, spare4)
	const n4, n6 = 7, 5
	connectRefused(t, pr.clientNs, netip.AddrPortFrom(pr.pod4, 8080), n4)
	connectRefused(t, pr.clientNs, netip.AddrPortFrom(pr.pod6, 8081), n6)

	c := counts(t, p)
	for _, tc := range []struct {
		ip   netip.Addr
		want uint64
	}{{pr.pod4, n4}, {pr.pod6, n6}} {
		got := c[tc.ip]
		if got.SentBy != tc.want || got.SentTo != 0 {
			t.Errorf("%s: sent_by=%d sent_to=%d, want sent_by=%d sent_to=0", tc.ip, got.SentBy, got.SentTo, tc.want)
		}
		if r := got.ByReason[ReasonKey{SentBy, "NO_SOCKET"}]; r != tc.want {
			t.Errorf("%s: NO_SOCKET count %d, want %d (reasons %v)", tc.ip, r, tc.want, got.ByReason)
		}
	}
	if got := c[spare4].Total(); got != 0 {
		t.Errorf("watched but silent %s counted %d", spare4, got)
	}
	for _, ip := range []netip.Addr{pr.client4, pr.client6} {
		if _, ok := c[ip]; ok {
			t.Errorf("unwatched client %s has counts %+v", ip, c[ip])
		}
	}
}

func TestExactCountsTracepoint(t *testing.T) { exactCounts(t, ModeTracepoint) }

// TestExactCountsBTF forces tp_btf (kernels >= 6.10): it shares the skb and
// socket parsing with the fentry fallback, so this also checks that code here.
func TestExactCountsBTF(t *testing.T) {
	requireBTFTracepoint(t)
	exactCounts(t, ModeBTF)
}

func TestSentToWatchedBTF(t *testing.T) {
	requireBTFTracepoint(t)
	sentToWatched(t, ModeBTF)
}

func TestActiveResetBTF(t *testing.T) {
	requireBTFTracepoint(t)
	activeReset(t, ModeBTF)
}

func requireBTFTracepoint(t *testing.T) {
	t.Helper()
	requireRoot(t)
	if f := ProbeFeatures(Config{}); f.BTFTracepoint != nil {
		t.Skipf("kernel lacks the >= 6.10 tcp_send_reset BTF tracepoint: %v", f.BTFTracepoint)
	}
}

// TestExactCountsFentry forces the fallback mode. It skips only when the
// kernel refuses every fentry program (checked with a minimal one), which is
// the case on kernels without trampolines or under a policy forbidding them.
func TestExactCountsFentry(t *testing.T) {
	requireFentry(t)
	exactCounts(t, ModeFentry)
}

// TestSentToWatchedFentry: the "to watched" direction on the fallback path.
func TestSentToWatchedFentry(t *testing.T) {
	requireFentry(t)
	sentToWatched(t, ModeFentry)
}

func requireFentry(t *testing.T) {
	t.Helper()
	requireRoot(t)
	if f := ProbeFeatures(Config{}); f.Fentry != nil {
		t.Skipf("kernel lacks usable fentry: %v", f.Fentry)
	}
}

// TestSentToWatched watches the client: the resets the pod namespace sends
// back are "sent to watched", and the pod (unwatched) is not counted.
func TestSentToWatched(t *testing.T) { sentToWatched(t, "") }

func sentToWatched(t *testing.T, mode Mode) {
	p := loadProbe(t, mode)
	pr := newPair(t)
	mustWatch(t, p, pr.client4, pr.client6)
	connectRefused(t, pr.clientNs, netip.AddrPortFrom(pr.pod4, 9000), 4)
	connectRefused(t, pr.clientNs, netip.AddrPortFrom(pr.pod6, 9000), 3)
	c := counts(t, p)
	if got := c[pr.client4]; got.SentTo != 4 || got.SentBy != 0 {
		t.Errorf("client4 %+v, want sent_to=4 sent_by=0", got)
	}
	if got := c[pr.client6]; got.SentTo != 3 || got.SentBy != 0 {
		t.Errorf("client6 %+v, want sent_to=3 sent_by=0", got)
	}
	if _, ok := c[pr.pod4]; ok {
		t.Errorf("unwatched pod counted: %+v", c[pr.pod4])
	}
}

// TestPortFilterAndUnwatch: a port filter counts only that port; an
// unwatched address reports its final counts once, then nothing, and counts
// from zero when watched again.
func TestPortFilterAndUnwatch(t *testing.T) {
	p := loadProbe(t, "")
	pr := newPair(t)
	if err := p.WatchPort(pr.pod4, 7000); err != nil {
		t.Fatal(err)
	}
	connectRefused(t, pr.clientNs, netip.AddrPortFrom(pr.pod4, 7000), 3)
	connectRefused(t, pr.clientNs, netip.AddrPortFrom(pr.pod4, 7001), 2)
	if got := counts(t, p)[pr.pod4].SentBy; got != 3 {
		t.Fatalf("port 7000 filter: sent_by=%d, want 3", got)
	}
	if err := p.Unwatch(pr.pod4); err != nil {
		t.Fatal(err)
	}
	connectRefused(t, pr.clientNs, netip.AddrPortFrom(pr.pod4, 7000), 2)
	if got := counts(t, p)[pr.pod4].SentBy; got != 3 {
		t.Errorf("after unwatch, first read: sent_by=%d, want the final 3", got)
	}
	if got, ok := counts(t, p)[pr.pod4]; ok {
		t.Errorf("after unwatch, second read still has %+v", got)
	}
	mustWatch(t, p, pr.pod4)
	connectRefused(t, pr.clientNs, netip.AddrPortFrom(pr.pod4, 7001), 1)
	if got := counts(t, p)[pr.pod4].SentBy; got != 1 {
		t.Errorf("watched again: sent_by=%d, want 1", got)
	}
}

// TestEvents checks the ring buffer events: addresses, ports, direction,
// reason and a wall-clock time close to now.
func TestEvents(t *testing.T) {
	p := loadProbe(t, "")
	pr := newPair(t)
	mustWatch(t, p, pr.pod6)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs := p.Events(ctx)
	before := time.Now()
	connectRefused(t, pr.clientNs, netip.AddrPortFrom(pr.pod6, 6553), 2)
	for i := 0; i < 2; i++ {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatal("events channel closed early")
			}
			if ev.Sender != netip.AddrPortFrom(pr.pod6, 6553) || ev.Peer.Addr() != pr.client6 || ev.Peer.Port() == 0 {
				t.Errorf("event %d: sender %s peer %s", i, ev.Sender, ev.Peer)
			}
			if ev.Direction != SentBy || ev.Reason != "NO_SOCKET" {
				t.Errorf("event %d: direction %s reason %s", i, ev.Direction, ev.Reason)
			}
			if d := ev.Time.Sub(before); d < -time.Second || d > 5*time.Second {
				t.Errorf("event %d: time %s is %s after the attempts started", i, ev.Time, d)
			}
		case <-ctx.Done():
			t.Fatalf("got %d events, want 2", i)
		}
	}
	cancel()
	for range evs { // must close after cancel
	}
}

// TestRunTrace runs the trace-rsts function for real: it says when it is
// attached, counts the resets from then on on the watched port only, and
// delivers one event per counted reset (well under the rate limit) before
// it returns.
func TestRunTrace(t *testing.T) {
	requireRoot(t)
	ensureTracefs(t)
	pr := newPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var attached []TraceStart
	var events []Event
	opts := TraceOptions{IPs: []netip.Addr{pr.pod4, pr.pod6}, Port: 5432, Duration: time.Hour}
	opts.Attached = func(st TraceStart) {
		mu.Lock()
		attached = append(attached, st)
		mu.Unlock()
		go func() {
			connectRefused(t, pr.clientNs, netip.AddrPortFrom(pr.pod4, 5432), 6)
			connectRefused(t, pr.clientNs, netip.AddrPortFrom(pr.pod4, 5433), 2) // other port: not counted
			mu.Lock()
			n := len(events)
			mu.Unlock()
			for deadline := time.Now().Add(10 * time.Second); n < 6 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				n = len(events)
				mu.Unlock()
			}
			cancel()
		}()
	}
	opts.Event = func(ev Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}
	before := time.Now()
	res, err := Trace(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]uint64{pr.pod4.String(): 6, pr.pod6.String(): 0}
	if !reflect.DeepEqual(res.Counts, want) || res.Mode == ModeNone {
		t.Errorf("counts %v mode %s, want %v", res.Counts, res.Mode, want)
	}
	if len(attached) != 1 || attached[0].Mode != res.Mode || attached[0].Time.Before(before) || !attached[0].Time.Equal(res.Started) {
		t.Errorf("attached %+v, result mode %s started %s", attached, res.Mode, res.Started)
	}
	if len(events) != 6 || res.Events == nil || res.Events.Delivered != 6 {
		t.Fatalf("%d events, result %+v; want 6", len(events), res.Events)
	}
	for i, ev := range events {
		if ev.Sender.Addr() != pr.pod4 || ev.Sender.Port() != 5432 || ev.Peer.Addr() != pr.client4 || ev.Direction != SentBy ||
			ev.Time.Before(attached[0].Time) {
			t.Errorf("event %d: %+v", i, ev)
		}
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestNoFDLeak loads, uses and closes the probe repeatedly: the number of
// open file descriptors must return to where it was.
func TestNoFDLeak(t *testing.T) {
	requireRoot(t)
	ensureTracefs(t)
	// Warm up library caches (kernel BTF, feature probes) once.
	if p, err := Load(Config{}); err == nil {
		p.Close()
	}
	before := openFDs(t)
	for i := 0; i < 3; i++ {
		p, err := Load(Config{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		evs := p.Events(ctx)
		if err := p.Watch(netip.MustParseAddr("192.0.2.77")); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Counts(); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		for range evs { // closes once the probe is closed
		}
		cancel()
		if err := p.Close(); err != nil { // idempotent
			t.Fatal(err)
		}
	}
	if after := openFDs(t); after != before {
		t.Errorf("open fds: %d before, %d after 3 load/close cycles", before, after)
	}
}

// TestActiveReset: a pod's socket aborts an established connection
// (SO_LINGER 0, then close): an "active" reset, not a reply to a segment.
// Watching both sides counts it once in each direction.
func TestActiveReset(t *testing.T) { activeReset(t, "") }

func TestActiveResetFentry(t *testing.T) {
	requireFentry(t)
	activeReset(t, ModeFentry)
}

func activeReset(t *testing.T, mode Mode) {
	p := loadProbe(t, mode)
	pr := newPair(t)
	mustWatch(t, p, pr.pod4, pr.client6)
	const n = 3
	for _, dst := range []netip.AddrPort{netip.AddrPortFrom(pr.pod4, 7100), netip.AddrPortFrom(pr.pod6, 7100)} {
		abortConnections(t, pr, dst, n)
	}
	c := counts(t, p)
	if got := c[pr.pod4]; got.SentBy != n || got.SentTo != 0 {
		t.Errorf("pod4 (server aborting) %+v, want sent_by=%d", got, n)
	}
	if got := c[pr.client6]; got.SentTo != n || got.SentBy != 0 {
		t.Errorf("client6 (receiving the abort) %+v, want sent_to=%d", got, n)
	}
	t.Logf("reasons: pod4 %v client6 %v", c[pr.pod4].ByReason, c[pr.client6].ByReason)
}

// abortConnections: a listener in the pod namespace accepts n connections
// from the client namespace and closes each with SO_LINGER 0 (an RST).
func abortConnections(t *testing.T, pr *pair, dst netip.AddrPort, n int) {
	t.Helper()
	var lfd int
	if err := inNetns(pr.podNs, func() error {
		var err error
		lfd, err = listenTCP(dst)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	for i := 0; i < n; i++ {
		var cfd int
		if err := inNetns(pr.clientNs, func() error {
			var err error
			cfd, err = dialTCP(dst)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		afd, _, err := unix.Accept(lfd)
		if err != nil {
			unix.Close(cfd)
			t.Fatal(err)
		}
		if err := unix.SetsockoptLinger(afd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
			t.Fatal(err)
		}
		unix.Close(afd) // sends the RST
		buf := make([]byte, 1)
		if _, err := unix.Read(cfd, buf); err != unix.ECONNRESET {
			t.Errorf("client read after abort: %v, want connection reset", err)
		}
		unix.Close(cfd)
	}
}

func sockaddr(ap netip.AddrPort) (int, unix.Sockaddr) {
	if ap.Addr().Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

func listenTCP(ap netip.AddrPort) (int, error) {
	fam, sa := sockaddr(ap)
	fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, 16); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func dialTCP(ap netip.AddrPort) (int, error) {
	fam, sa := sockaddr(ap)
	fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
