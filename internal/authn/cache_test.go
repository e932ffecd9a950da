package authn

import (
	"fmt"
	"testing"
	"time"
)

func TestTTLCacheBoundAndEviction(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	c := newTTLCache[int](3, clk.now)
	c.put("a", 1, true, 10*time.Second)
	c.put("b", 2, true, 30*time.Second)
	c.put("c", 3, false, 20*time.Second)
	if v, ok, found := c.get("c"); !found || ok || v != 3 {
		t.Fatalf("get c = %d %v %v", v, ok, found)
	}
	// Full: the entry closest to expiry (a) goes.
	c.put("d", 4, true, 30*time.Second)
	if _, _, found := c.get("a"); found {
		t.Error("a survived eviction")
	}
	if c.len() != 3 {
		t.Errorf("len = %d, want 3", c.len())
	}
	// Overwriting an existing key evicts nothing.
	c.put("d", 5, true, 30*time.Second)
	if v, _, _ := c.get("d"); v != 5 || c.len() != 3 {
		t.Errorf("d = %d, len %d", v, c.len())
	}
	// Expired entries are invisible and dropped first.
	clk.add(25 * time.Second) // c expired
	if _, _, found := c.get("c"); found {
		t.Error("expired c still found")
	}
	c.put("e", 6, true, time.Minute)
	for _, k := range []string{"b", "d", "e"} {
		if _, _, found := c.get(k); !found {
			t.Errorf("%s evicted although c had expired", k)
		}
	}
	// Never grows past its bound.
	for i := range 100 {
		c.put(fmt.Sprint("k", i), i, true, time.Minute)
	}
	if c.len() != 3 {
		t.Errorf("len = %d after 100 puts, want 3", c.len())
	}
}
