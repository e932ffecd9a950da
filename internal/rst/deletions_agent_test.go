package rst

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/watch"
)

// TestPipelineReadsAgentDeletions: wired as the agent's command wires them,
// the agent records a pod delivery into the one registry of pod deletions
// and the pipeline, handed the same delivery next, writes that request time
// into the probe; a second delete does not move it, and a request of
// another pod on the address is not this pod's.
func TestPipelineReadsAgentDeletions(t *testing.T) {
	p, fp, clk := newTestPipeline(t, nil)
	a := agent.New(agent.Options{Clock: clk, PodDeletions: testDeletions(p)})
	deliver := func(pod string, requested time.Time, deleted bool) {
		ev := watch.Event{Kind: watch.KindPod, Name: pod, PodIPs: []netip.Addr{webIP4}, DeletionRequested: requested,
			Deleted: deleted, At: clk.Now()}
		a.OnEvent(ev)
		p.OnPod(PodChange{Name: ev.Name, IPs: ev.PodIPs, Deleted: ev.Deleted, At: ev.At})
	}
	termNs := func() uint64 {
		fp.mu.Lock()
		defer fp.mu.Unlock()
		return fp.watched[webIP4].TermNs
	}
	deliver("shop/web-1", time.Time{}, false)
	if got := termNs(); got != 0 {
		t.Fatalf("a live pod has a deletion time %d", got)
	}
	requested := clk.Now().Add(-2 * time.Second) // deletionTimestamp - grace
	clk.Step(time.Second)
	deliver("shop/web-1", requested, false)
	if got, want := termNs(), uint64(requested.UnixNano()); got != want {
		t.Errorf("after the deletion request: %d, want %d", got, want)
	}
	clk.Step(time.Second)
	deliver("shop/web-1", clk.Now(), false) // deleted again with grace 0
	if got, want := termNs(), uint64(requested.UnixNano()); got != want {
		t.Errorf("after a second delete: %d, want the first request %d", got, want)
	}
	clk.Step(time.Second)
	deliver("blog/b-1", time.Time{}, false) // the address taken over
	if got := termNs(); got != 0 {
		t.Errorf("the new pod on the address has the old pod's deletion time %d", got)
	}
}
