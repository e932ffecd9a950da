package nodecheck

import (
	"sync"

	"github.com/netdrift/netdrift/internal/model"
)

// StaleConnections counts new connections (conntrack NEW events) that were
// sent to a backend no longer valid for their frontend: the direct measure of
// clients hurt by a stale DNAT rule (netdrift_stale_backend_connections_total).
// Safe for concurrent use; the index is replaced whenever the desired state
// or the node's addresses change.
type StaleConnections struct {
	mu     sync.Mutex
	idx    *ConntrackIndex
	counts map[StaleConnKey]uint64
}

// StaleConnKey labels a count: the service port and the protocol.
type StaleConnKey struct {
	Service  model.ServicePort
	Protocol model.Protocol
}

// SetIndex replaces the classifier (nil stops counting).
func (s *StaleConnections) SetIndex(x *ConntrackIndex) {
	s.mu.Lock()
	s.idx = x
	s.mu.Unlock()
}

// Observe classifies one new flow and counts it when stale.
func (s *StaleConnections) Observe(f model.Flow) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idx == nil {
		return false
	}
	fe, stale := s.idx.Classify(f)
	if !stale {
		return false
	}
	if s.counts == nil {
		s.counts = map[StaleConnKey]uint64{}
	}
	s.counts[StaleConnKey{s.idx.desired[fe].Service, f.Protocol}]++
	return true
}

// Counts returns a copy of the counters (monotonic since start).
func (s *StaleConnections) Counts() map[StaleConnKey]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[StaleConnKey]uint64, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}
