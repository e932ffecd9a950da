package nodecheck

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

func TestStaleConnections(t *testing.T) {
	var s StaleConnections
	stale := flow(model.UDP, "10.244.0.5:40002", "10.96.0.10:53", "10.244.3.3:53")
	if s.Observe(stale) {
		t.Fatal("counted without an index")
	}
	s.SetIndex(NewConntrackIndex(testDesired(), map[netip.Addr]bool{}))
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Observe(stale)
			s.Observe(flow(model.UDP, "10.244.0.5:40001", "10.96.0.10:53", "10.244.1.5:53")) // valid
		}()
	}
	wg.Wait()
	got := s.Counts()
	k := StaleConnKey{sp("kube-system", "kube-dns", "dns", model.UDP), model.UDP}
	if len(got) != 1 || got[k] != 8 {
		t.Errorf("counts %v", got)
	}
}
