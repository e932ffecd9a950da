package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/model"
)

// fakeCommits is a change feed's commit log (pure logic: the real one is
// nfevents.Watcher.CommittedAfter, tested on the kernel's events).
type fakeCommits struct {
	gens []uint32
	at   []time.Time
}

func (f *fakeCommits) commit(gen uint32, at time.Time) {
	f.gens, f.at = append(f.gens, gen), append(f.at, at)
}

func (f *fakeCommits) Generation() uint32 {
	if len(f.gens) == 0 {
		return 100
	}
	return f.gens[len(f.gens)-1]
}

func (f *fakeCommits) CommittedAfter(gen uint32) (int, time.Time) {
	for i, g := range f.gens {
		if int32(g-gen) > 0 {
			return len(f.gens) - i, f.at[i]
		}
	}
	return 0, time.Time{}
}

// TestViewTrailingTheKernelIsNotCurrent: while commits the loop has not
// applied wait, every answer says how far the view trails; past
// stale-after the view is not current (datapath_behind), and applying the
// events and reading makes it current again.
func TestViewTrailingTheKernelIsNotCurrent(t *testing.T) {
	h := newHarness(t)
	log := &fakeCommits{}
	h.a = New(Options{Config: h.a.cfg, Clock: h.clk, Cluster: h.c, Datapath: h.src, Mode: model.ModeIPTables, Recorder: h, Commits: log})
	h.start()
	if v := h.a.State().View; !v.Current || v.Behind.Commits != 0 {
		t.Fatalf("nothing committed since the read: %+v", v)
	}
	committed := h.clk.Now()
	log.commit(101, committed)
	log.commit(102, committed.Add(time.Second))
	h.clk.Step(2 * time.Second) // the loop is busy: no step
	s := h.a.SummaryState()
	if !s.View.Current || s.View.Behind.Commits != 2 || !s.View.Behind.Since.Equal(committed) {
		t.Fatalf("2 s behind (stale-after %s): %+v; want current, 2 commits behind since %s", h.a.cfg.StaleAfter, s.View, committed)
	}
	h.clk.Step(4 * time.Second)
	s = h.a.SummaryState()
	if s.View.Current || s.Ready || s.View.Code != ViewBehind || !s.View.Since.Equal(committed.Add(h.a.cfg.StaleAfter)) ||
		!strings.Contains(s.View.Reason, "2 nf_tables commits") {
		t.Fatalf("6 s behind: ready %v view %+v; want datapath_behind since stale-after past the first commit", s.Ready, s.View)
	}
	if l := h.a.LagState(); l.View.Code != ViewBehind {
		t.Fatalf("lag answer: %+v", l.View)
	}
	// The loop applies the first event only: still behind, by one commit.
	h.a.onChange(h.ctx, datapath.ChangeEvent{Generation: 101, Received: committed}, true)
	h.advance(0)
	if v := h.a.State().View; !v.Current || v.Behind.Commits != 1 || !v.Behind.Since.Equal(committed.Add(time.Second)) {
		t.Fatalf("one event applied and read: %+v; want one commit behind, for 5 s: current", v)
	}
	h.a.onChange(h.ctx, datapath.ChangeEvent{Generation: 102, Received: committed.Add(time.Second)}, true)
	h.advance(0)
	if s := h.a.State(); !s.View.Current || !s.Ready || s.View.Behind.Commits != 0 {
		t.Fatalf("both applied and read: ready %v view %+v", s.Ready, s.View)
	}
	// The feed ends: reads are whole, nothing trails them.
	log.commit(103, h.clk.Now())
	h.a.onChange(h.ctx, datapath.ChangeEvent{}, false)
	h.clk.Step(time.Minute)
	if v := h.a.State().View; v.Behind.Commits != 0 {
		t.Fatalf("polling only: %+v", v)
	}
}
