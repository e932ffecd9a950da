package authn

import (
	"sync"
	"time"
)

// ttlCache is a small bounded map of answers that expire. When full, expired entries are
// dropped first, then the entry closest to expiry.
type ttlCache[V any] struct {
	mu      sync.Mutex
	max     int
	now     func() time.Time
	entries map[string]cacheEntry[V]
}

type cacheEntry[V any] struct {
	value   V
	ok      bool
	expires time.Time
}

func newTTLCache[V any](max int, now func() time.Time) *ttlCache[V] {
	return &ttlCache[V]{max: max, now: now, entries: map[string]cacheEntry[V]{}}
}

// get returns the value, its ok flag and whether a live entry was found.
func (c *ttlCache[V]) get(key string) (V, bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, found := c.entries[key]
	if !found || !c.now().Before(e.expires) {
		var zero V
		return zero, false, false
	}
	return e.value, e.ok, true
}

func (c *ttlCache[V]) put(key string, v V, ok bool, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, exists := c.entries[key]; !exists && len(c.entries) >= c.max {
		c.evict(now)
	}
	c.entries[key] = cacheEntry[V]{value: v, ok: ok, expires: now.Add(ttl)}
}

func (c *ttlCache[V]) evict(now time.Time) {
	var soonest string
	var soonestAt time.Time
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
			continue
		}
		if soonest == "" || e.expires.Before(soonestAt) {
			soonest, soonestAt = k, e.expires
		}
	}
	if len(c.entries) >= c.max && soonest != "" {
		delete(c.entries, soonest)
	}
}

func (c *ttlCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
