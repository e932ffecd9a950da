package deletions

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

// TestRegistry: the first request of a pod stays, another pod on the
// address replaces it, a zero request records nothing, IPv4-mapped and
// plain addresses are one, and entries go Keep after their delivery.
func TestRegistry(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	ip := netip.MustParseAddr("10.244.1.13")
	r := New(time.Minute)
	r.Record("shop/web-1", []netip.Addr{ip}, time.Time{}, t0)
	if _, _, ok := r.Requested(ip); ok || r.Len() != 0 {
		t.Fatalf("a delivery without a request was recorded")
	}
	r.Record("shop/web-1", []netip.Addr{netip.AddrFrom16(ip.As16())}, t0, t0)
	r.Record("shop/web-1", []netip.Addr{ip}, t0.Add(time.Second), t0.Add(time.Second)) // grace 0 after a graceful delete
	if pod, at, ok := r.Requested(ip); !ok || pod != "shop/web-1" || !at.Equal(t0) {
		t.Errorf("after a second delete: %s %v %v, want shop/web-1 at the first request", pod, at, ok)
	}
	later := t0.Add(30 * time.Second)
	r.Record("blog/b-1", []netip.Addr{ip}, later, later)
	if pod, at, _ := r.Requested(ip); pod != "blog/b-1" || !at.Equal(later) {
		t.Errorf("after reuse: %s %v, want blog/b-1 at %v", pod, at, later)
	}
	r.Expire(later.Add(time.Minute))
	if r.Len() != 1 {
		t.Errorf("expired at exactly Keep: %d left", r.Len())
	}
	r.Expire(later.Add(time.Minute + time.Nanosecond))
	if r.Len() != 0 {
		t.Errorf("%d kept past Keep", r.Len())
	}
	if New(0).Keep() != DefaultKeep {
		t.Errorf("default keep %v", New(0).Keep())
	}
}

// TestRegistryConcurrent: the owner records while readers read (-race).
func TestRegistryConcurrent(t *testing.T) {
	r := New(0)
	now := time.Now()
	var wg sync.WaitGroup
	for i := range 4 {
		ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
		wg.Add(2)
		go func() { defer wg.Done(); r.Record("ns/p", []netip.Addr{ip}, now, now) }()
		go func() { defer wg.Done(); r.Requested(ip) }()
	}
	wg.Wait()
	if r.Len() != 4 {
		t.Errorf("%d recorded, want 4", r.Len())
	}
}
