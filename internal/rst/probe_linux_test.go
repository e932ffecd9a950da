package rst

import (
	"net/netip"
	"testing"
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
func TestExactCountsFentry(t *testing.T)     { exactCounts(t, ModeFentry) }
