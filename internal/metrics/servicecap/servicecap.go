// Package servicecap is netdrift's one policy for per-service metric series
// (--max-service-series): a service gets its own series once admitted; at
// most Max services are admitted, those seen first (several at once: by
// namespace and name), for the life of the process; every other service is
// summed under namespace and service Other. Admission is never taken back,
// so a counter's series does not move between a service and Other, and a
// gauge's series do not jump as the counts shift.
package servicecap

import (
	"sort"
	"sync"

	"github.com/netdrift/netdrift/internal/model"
)

// Other is the label value of the series summing the services not admitted.
const Other = "_other"

// DefaultMax is the cap when none is given.
const DefaultMax = 500

// Key is a service as its series' labels name it (namespace, service): the
// service's one identity, model.ServiceName.
type Key = model.ServiceName

// OtherKey is the series of the services not admitted.
var OtherKey = Key{Namespace: Other, Name: Other}

// Cap admits services up to its maximum. Safe for concurrent use.
type Cap struct {
	max      int
	mu       sync.Mutex
	admitted map[Key]bool
}

// New returns a cap of max services (DefaultMax when max <= 0).
func New(max int) *Cap {
	if max <= 0 {
		max = DefaultMax
	}
	return &Cap{max: max, admitted: map[Key]bool{}}
}

// Labels admits the new services among keys, by name, while there is room,
// and returns the series of each: itself when admitted, OtherKey otherwise.
func (c *Cap) Labels(keys []Key) func(Key) Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	var fresh []Key
	for _, k := range keys {
		if !c.admitted[k] {
			fresh = append(fresh, k)
		}
	}
	sort.Slice(fresh, func(i, j int) bool {
		if fresh[i].Namespace != fresh[j].Namespace {
			return fresh[i].Namespace < fresh[j].Namespace
		}
		return fresh[i].Name < fresh[j].Name
	})
	for _, k := range fresh {
		if len(c.admitted) >= c.max {
			break
		}
		c.admitted[k] = true
	}
	admitted := make(map[Key]bool, len(keys))
	for _, k := range keys {
		admitted[k] = c.admitted[k]
	}
	return func(k Key) Key {
		if admitted[k] {
			return k
		}
		return OtherKey
	}
}

// Label admits k if there is room and returns its series: k when
// admitted, OtherKey otherwise.
func (c *Cap) Label(k Key) Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.admitted[k] && len(c.admitted) < c.max {
		c.admitted[k] = true
	}
	if c.admitted[k] {
		return k
	}
	return OtherKey
}

// Sum admits the services of counts and sums the counts by series.
func Sum[N uint64 | int | float64](c *Cap, counts map[Key]N) map[Key]N {
	keys := make([]Key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	label := c.Labels(keys)
	out := make(map[Key]N, len(counts))
	for k, n := range counts {
		out[label(k)] += n
	}
	return out
}
