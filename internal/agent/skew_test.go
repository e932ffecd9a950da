package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/drift"
)

// TestSkewedTriggerTimeIgnoredAndCounted: a change whose slice carries a
// trigger time in the future, or far in the past, of this node's clock
// gets a lag sample with its node lag (T2-T1) but no network latency, is
// counted by direction, noted in the status, and measures no watch delay.
// A trigger time just after the delivery is clamped to it.
func TestSkewedTriggerTimeIgnoredAndCounted(t *testing.T) {
	for _, c := range []struct {
		name    string
		offset  time.Duration // trigger time minus delivery
		latency time.Duration // want T2-T0; -1: none
		future  uint64
		past    uint64
	}{
		{"future", 10 * time.Minute, -1, 1, 0},
		{"far past", -2 * drift.MaxTriggerAge, -1, 0, 1},
		{"just after the delivery: clamped", 300 * time.Millisecond, 200 * time.Millisecond, 0, 0},
		{"plausible", -50 * time.Millisecond, 250 * time.Millisecond, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.start()
			h.setSlice(slice("web", "10.1.0.1", "10.1.0.2", "10.1.0.3"), h.clk.Now().Add(c.offset))
			h.advance(100 * time.Millisecond)
			h.kubeProxySyncs()
			h.advance(100 * time.Millisecond)
			if len(h.lags) != 1 || h.lags[0].NodeLag() != 200*time.Millisecond {
				t.Fatalf("samples %+v: want one with T2-T1 200ms", h.lags)
			}
			l, ok := h.lags[0].NetworkLatency()
			if c.latency < 0 && ok {
				t.Errorf("network latency %v from a skewed trigger time", l)
			}
			if c.latency >= 0 && (!ok || l != c.latency) {
				t.Errorf("network latency %v (%v), want %v", l, ok, c.latency)
			}
			s := h.a.State()
			if s.TriggerSkew.Future != c.future || s.TriggerSkew.Past != c.past {
				t.Errorf("skew counts %+v, want future %d past %d", s.TriggerSkew, c.future, c.past)
			}
			noted := false
			for _, n := range s.Notes {
				noted = noted || strings.Contains(n, "trigger times ignored as skewed") && strings.Contains(n, "shop/web")
			}
			if noted != (c.future+c.past > 0) {
				t.Errorf("notes %q: skew noted %v, want %v", s.Notes, noted, c.future+c.past > 0)
			}
			if d := h.delay["endpointslice"]; (len(d) == 0) != (c.latency < 0) || (len(d) == 1 && d[0] < 0) {
				t.Errorf("watch delays %v", d)
			}
		})
	}
}

// TestSkewOfAnUnchangedDeliveryNotCounted: a delivery that changes nothing
// on the node (a relist re-delivers every slice with its old trigger time)
// is no change: its trigger time, however old, is not counted as skew.
func TestSkewOfAnUnchangedDeliveryNotCounted(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.setSlice(slice("web", "10.1.0.1", "10.1.0.2"), h.clk.Now().Add(-48*time.Hour))
	h.advance(100 * time.Millisecond)
	if s := h.a.State(); s.TriggerSkew.Future+s.TriggerSkew.Past != 0 || len(h.lags) != 0 {
		t.Fatalf("skew %+v, samples %+v for an unchanged slice", s.TriggerSkew, h.lags)
	}
}

// TestLostChangeEventsCounted: every lost-events notice is counted (the
// metric says the kernel overran the socket; each made a full read).
func TestLostChangeEventsCounted(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.a.onChange(h.ctx, datapath.ChangeEvent{Generation: 3, Received: h.clk.Now()}, true)
	if n := h.a.State().ChangeEventsLost; n != 0 {
		t.Fatalf("%d lost after an ordinary event", n)
	}
	for range 2 {
		h.a.onChange(h.ctx, datapath.ChangeEvent{Lost: true, Received: h.clk.Now()}, true)
	}
	if n := h.a.State().ChangeEventsLost; n != 2 || h.src.resyncs != 2 {
		t.Fatalf("%d lost, %d resyncs after two notices; want 2 and 2", n, h.src.resyncs)
	}
}
