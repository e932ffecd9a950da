package rst

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Helpers for the external tests (package rst_test), which may import
// packages that import rst (internal/api).

// RequireProbe skips without root and mounts tracefs if needed.
func RequireProbe(tb testing.TB) {
	tb.Helper()
	requireRoot(tb)
	ensureTracefs(tb)
}

// FloodPair is a pod namespace with no listener and a client namespace.
type FloodPair struct{ p *pair }

// NewFloodPair creates the two namespaces (removed at cleanup).
func NewFloodPair(tb testing.TB) FloodPair { return FloodPair{newPair(tb)} }

// Pod4 is the pod namespace's IPv4 address.
func (f FloodPair) Pod4() netip.Addr { return f.p.pod4 }

// SYNFlood sends n TCP SYNs (raw socket, varying source ports) from the
// client namespace to port of the pod's IPv4 address, which has no
// listener, and returns how many resets the pod namespace sent for them
// (its Tcp OutRsts increase, once it stops growing).
func (f FloodPair) SYNFlood(tb testing.TB, port uint16, n int) uint64 {
	tb.Helper()
	before := outRsts(tb, f.p.pod)
	fd := rawSender(tb, f.p.clientNs)
	syn := synPacket(f.p.client4, netip.AddrPortFrom(f.p.pod4, port))
	dst := &unix.SockaddrInet4{Addr: f.p.pod4.As4()}
	for i := range n {
		binary.BigEndian.PutUint16(syn[20:], uint16(10000+i%50000))
		fixTCPChecksum(syn, f.p.client4, f.p.pod4)
		if err := unix.Sendto(fd, syn, 0, dst); err != nil {
			tb.Fatal(err)
		}
	}
	last := outRsts(tb, f.p.pod)
	for stable := 0; stable < 5; stable++ {
		time.Sleep(20 * time.Millisecond)
		if cur := outRsts(tb, f.p.pod); cur != last {
			last, stable = cur, 0
		}
	}
	return last - before
}
