package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/netdrift/netdrift/lab/scenarios"
)

// SoakPoint is one sample of a long run (Config.SoakEvery): both processes'
// resident memory, the agent's goroutines and its findings at that moment.
type SoakPoint struct {
	At                 time.Duration // since the sampler started (the first churn window)
	AgentRSS, ProxyRSS int64
	Goroutines         float64
	Stale, Pending     int  // the agent's stale findings and pending mismatches (/v1/drift)
	Err                bool // a sample that failed (the others still count)
	// Counters of the agent's own bookkeeping (its /metrics), to tell what
	// a run did besides the changes: overruns of its change-event socket,
	// full audits and the services they corrected, changes dropped without
	// a sample, the reader's self-audits, how many differed and how many
	// were put off by commits, reader fallbacks in force.
	EventsLost, FullAudits, Corrections, Dropped, ReaderAudits, ReaderDiffs, ReaderDeferred, Fallbacks float64
	// HeapAlloc is the agent's heap in use (bytes, go_memstats_heap_alloc_bytes:
	// live objects and those not yet collected), to tell a growing heap
	// from RSS the runtime keeps.
	HeapAlloc float64
	// LiveHeap is what the agent's last GC kept (go_gc_heap_live_bytes):
	// the figure that tells retained memory from garbage.
	LiveHeap float64
	// FirstStale names up to three stale findings of this sample.
	FirstStale []string
	// Check is the findings checked against the kernel (soak_verify.go);
	// nil when there were none, no verifier, or no check due.
	Check *StaleCheck
	// NoView is the view's code when the answer said it rests on no
	// current view ("" when current): its findings are no statement.
	NoView string
	// BehindCommits is how many commits the answer's view trailed the kernel by.
	BehindCommits int
}

// soakCounters are the metrics each sample reads into its counters.
var soakCounters = []struct {
	name string
	dst  func(*SoakPoint) *float64
}{
	{"netdrift_change_events_lost_total", func(p *SoakPoint) *float64 { return &p.EventsLost }},
	{"netdrift_full_audits_total", func(p *SoakPoint) *float64 { return &p.FullAudits }},
	{"netdrift_full_audit_corrections_total", func(p *SoakPoint) *float64 { return &p.Corrections }},
	{"netdrift_lag_samples_dropped_total", func(p *SoakPoint) *float64 { return &p.Dropped }},
	{"go_memstats_heap_alloc_bytes", func(p *SoakPoint) *float64 { return &p.HeapAlloc }},
	{"go_gc_heap_live_bytes", func(p *SoakPoint) *float64 { return &p.LiveHeap }},
	{"netdrift_reader_audits_total", func(p *SoakPoint) *float64 { return &p.ReaderAudits }},
	{"netdrift_reader_audit_differences_total", func(p *SoakPoint) *float64 { return &p.ReaderDiffs }},
	{"netdrift_reader_audits_deferred_total", func(p *SoakPoint) *float64 { return &p.ReaderDeferred }},
	{"netdrift_reader_fallback_active", func(p *SoakPoint) *float64 { return &p.Fallbacks }},
}

// soakSampler samples every SoakEvery until stopped.
type soakSampler struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	points []SoakPoint
}

func startSoak(ctx context.Context, every time.Duration, a *scenarios.Agent, p pids, v *staleVerifier) *soakSampler {
	s := &soakSampler{stop: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			pt := sampleOnce(ctx, a, p, v)
			pt.At = time.Since(start)
			s.mu.Lock()
			s.points = append(s.points, pt)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the points.
func (s *soakSampler) Stop() []SoakPoint {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.points
}

func sampleOnce(ctx context.Context, a *scenarios.Agent, p pids, v *staleVerifier) SoakPoint {
	var pt SoakPoint
	if m, err := ReadMem(p.agent); err == nil {
		pt.AgentRSS = m.RSS
	} else {
		pt.Err = true
	}
	if m, err := ReadMem(p.proxy); err == nil {
		pt.ProxyRSS = m.RSS
	} else {
		pt.Err = true
	}
	if ms, err := a.Metrics(ctx); err == nil {
		pt.Goroutines, _ = ms.Sum("go_goroutines", nil)
		for _, c := range soakCounters {
			*c.dst(&pt), _ = ms.Sum(c.name, nil)
		}
	} else {
		pt.Err = true
	}
	var d struct {
		View     soakView      `json:"view"`
		Findings []soakFinding `json:"findings"`
		Pending  []struct{}    `json:"pending"`
	}
	asked := time.Now()
	if err := a.Get(ctx, "/v1/drift", &d); err != nil {
		pt.Err = true
		return pt
	}
	pt.BehindCommits = d.View.BehindCommits
	if !d.View.Current {
		pt.NoView = d.View.Code
		return pt // no finding is a statement
	}
	pt.Stale, pt.Pending = len(d.Findings), len(d.Pending)
	for _, f := range d.Findings[:min(3, len(d.Findings))] {
		pt.FirstStale = append(pt.FirstStale, f.String())
	}
	if len(d.Findings) > 0 && v != nil && v.due() {
		pt.Check = v.check(ctx, d.Findings, d.View, asked)
	}
	return pt
}

// Slope is the least-squares slope of f over the points, per hour (0 with
// fewer than two points).
func Slope(points []SoakPoint, f func(SoakPoint) float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, p := range points {
		if p.Err {
			continue
		}
		x, y := p.At.Hours(), f(p)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	den := n*sxx - sx*sx
	if n < 2 || den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

func agentMiB(p SoakPoint) float64 { return float64(p.AgentRSS) / (1 << 20) }
func proxyMiB(p SoakPoint) float64 { return float64(p.ProxyRSS) / (1 << 20) }
func goroutines(p SoakPoint) float64 {
	return p.Goroutines
}

// SoakSummary is what a soak shows: first, last, peak and slope of each
// series, and the worst findings.
type SoakSummary struct {
	Points, Failed                                  int
	Span                                            time.Duration
	AgentFirst, AgentLast, AgentPeak                float64 // MiB
	AgentSlope, ProxySlope                          float64 // MiB per hour
	ProxyFirst, ProxyLast                           float64
	GoroutinesFirst, GoroutinesLast, GoroutinesPeak float64
	GoroutineSlope                                  float64 // per hour
	MaxStale, StaleSamples                          int     // worst stale findings seen; samples that had any
	Checked                                         StaleCheck
	CheckedSamples                                  int // samples whose findings were checked
	CheckErrors                                     []string
	// NoView counts the samples whose answer said it rested on no current
	// view, by code; MaxBehind is the most commits an answer trailed by.
	NoView    map[string]int
	MaxBehind int
}

// goodPoints are the samples that did not fail.
func goodPoints(points []SoakPoint) []SoakPoint {
	var ok []SoakPoint
	for _, p := range points {
		if !p.Err {
			ok = append(ok, p)
		}
	}
	return ok
}

// Summarize reduces the points.
func Summarize(points []SoakPoint) SoakSummary {
	var s SoakSummary
	var ok []SoakPoint
	for _, p := range points {
		if p.Err {
			s.Failed++
			continue
		}
		ok = append(ok, p)
	}
	s.Points = len(ok)
	if len(ok) == 0 {
		return s
	}
	first, last := ok[0], ok[len(ok)-1]
	s.Span = last.At - first.At
	s.AgentFirst, s.AgentLast = agentMiB(first), agentMiB(last)
	s.ProxyFirst, s.ProxyLast = proxyMiB(first), proxyMiB(last)
	s.GoroutinesFirst, s.GoroutinesLast = first.Goroutines, last.Goroutines
	for _, p := range ok {
		s.AgentPeak = max(s.AgentPeak, agentMiB(p))
		s.GoroutinesPeak = max(s.GoroutinesPeak, p.Goroutines)
		s.MaxStale = max(s.MaxStale, p.Stale)
		s.MaxBehind = max(s.MaxBehind, p.BehindCommits)
		if p.NoView != "" {
			if s.NoView == nil {
				s.NoView = map[string]int{}
			}
			s.NoView[p.NoView]++
		}
		if p.Stale > 0 {
			s.StaleSamples++
		}
		if c := p.Check; c != nil {
			s.CheckedSamples++
			if c.Err != "" {
				s.CheckErrors = append(s.CheckErrors, c.Err)
			}
			s.Checked.Confirmed += c.Confirmed
			s.Checked.False += c.False
			s.Checked.Fixed += c.Fixed
			s.Checked.Unchecked += c.Unchecked
			s.Checked.Skipped += c.Skipped
			if len(s.Checked.Examples) < 3 {
				s.Checked.Examples = append(s.Checked.Examples, c.Examples...)
			}
		}
	}
	s.AgentSlope = Slope(ok, agentMiB)
	s.ProxySlope = Slope(ok, proxyMiB)
	s.GoroutineSlope = Slope(ok, goroutines)
	return s
}

func writeSoak(w io.Writer, points []SoakPoint) {
	s := Summarize(points)
	fmt.Fprintf(w, "\nsoak: %d samples over %s (%d failed)\n", s.Points, s.Span.Round(time.Second), s.Failed)
	fmt.Fprintf(w, "  agent RSS       first %.0f MiB, last %.0f MiB, peak %.0f MiB, slope %+.1f MiB/h\n", s.AgentFirst, s.AgentLast, s.AgentPeak, s.AgentSlope)
	fmt.Fprintf(w, "  kube-proxy RSS  first %.0f MiB, last %.0f MiB, slope %+.1f MiB/h\n", s.ProxyFirst, s.ProxyLast, s.ProxySlope)
	fmt.Fprintf(w, "  goroutines      first %.0f, last %.0f, peak %.0f, slope %+.1f/h\n", s.GoroutinesFirst, s.GoroutinesLast, s.GoroutinesPeak, s.GoroutineSlope)
	fmt.Fprintf(w, "  stale findings  max %d, in %d of %d samples\n", s.MaxStale, s.StaleSamples, s.Points)
	fmt.Fprintf(w, "  answers on no current view %d (%s); most commits an answer's view trailed the kernel by: %d\n",
		sumCounts(s.NoView), countsString(s.NoView), s.MaxBehind)
	if s.StaleSamples > 0 {
		c := s.Checked
		fmt.Fprintf(w, "  checked against the kernel in %d samples (read right after the sample, at most every %s): %d confirmed, %d false, %d fixed by a commit in between, %d of kinds not checked, %d past the %d per sample the iptables check reads\n",
			s.CheckedSamples, checkEvery, c.Confirmed, c.False, c.Fixed, c.Unchecked, c.Skipped, chainCheckMax)
		for _, e := range c.Examples {
			fmt.Fprintf(w, "    false: %s\n", e)
		}
		for _, e := range s.CheckErrors {
			fmt.Fprintf(w, "    check failed: %s\n", e)
		}
	}
	writeSoakCounters(w, points)
}

// writeSoakCounters prints the agent's counters at the last good sample and
// the first samples that had stale findings, with up to three of them.
func writeSoakCounters(w io.Writer, points []SoakPoint) {
	shown := 0
	for _, p := range points {
		if p.Err {
			continue
		}
		if len(p.FirstStale) > 0 && shown < 5 {
			shown++
			fmt.Fprintf(w, "  at %s: %d stale, e.g. %s\n", p.At.Round(time.Second), p.Stale, strings.Join(p.FirstStale, "; "))
		}
	}
	var first *SoakPoint
	for i := range points {
		if !points[i].Err {
			first = &points[i]
			break
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		if p := points[i]; !p.Err {
			fmt.Fprintf(w, "  agent counters at the end: change events lost %.0f, full audits %.0f (services corrected %.0f, changes dropped without a sample %.0f), reader self-audits %.0f (differed %.0f, put off by commits %.0f), reader fallbacks in force %.0f\n",
				p.EventsLost, p.FullAudits, p.Corrections, p.Dropped, p.ReaderAudits, p.ReaderDiffs, p.ReaderDeferred, p.Fallbacks)
			fmt.Fprintf(w, "  agent heap_alloc (live + not yet collected) first %.0f MiB, last %.0f MiB, slope %+.1f MiB/h\n",
				first.HeapAlloc/(1<<20), p.HeapAlloc/(1<<20), Slope(goodPoints(points), func(p SoakPoint) float64 { return p.HeapAlloc / (1 << 20) }))
			writeSoakLive(w, goodPoints(points))
			return
		}
	}
}

func liveMiB(p SoakPoint) float64 { return p.LiveHeap / (1 << 20) }

// writeSoakLive prints the live heap (what each GC kept), the slopes of RSS
// and live heap over the second half of the run (a level the first half
// climbs to shows as a flat second half; a leak does not), and the series
// every fifth sample.
func writeSoakLive(w io.Writer, ok []SoakPoint) {
	if len(ok) == 0 {
		return
	}
	first, last := ok[0], ok[len(ok)-1]
	if last.LiveHeap == 0 {
		fmt.Fprintf(w, "  agent live heap: not exported (go_gc_heap_live_bytes)\n")
	} else {
		fmt.Fprintf(w, "  agent live heap (kept by the last GC) first %.0f MiB, last %.0f MiB, slope %+.1f MiB/h\n",
			liveMiB(first), liveMiB(last), Slope(ok, liveMiB))
	}
	half := ok[len(ok)/2:]
	fmt.Fprintf(w, "  second half (from %s): agent RSS slope %+.1f MiB/h, live heap slope %+.1f MiB/h\n",
		half[0].At.Round(time.Second), Slope(half, agentMiB), Slope(half, liveMiB))
	fmt.Fprintf(w, "  series: at, agent RSS MiB, live heap MiB, heap_alloc MiB, goroutines\n")
	for i, p := range ok {
		if i%5 == 0 || i == len(ok)-1 {
			fmt.Fprintf(w, "    %6s %5.0f %5.0f %5.0f %4.0f\n", p.At.Round(time.Second), agentMiB(p), liveMiB(p), p.HeapAlloc/(1<<20), p.Goroutines)
		}
	}
}
