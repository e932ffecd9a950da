package bench

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// WorstMatches describes the n matched samples farthest from their commit's
// first datagram, each with the commit of any table the listener read
// nearest to T2. A T2 that sits on another commit (in iptables-nft mode the
// filter commit of the same sync, read just before the nat one) was dated by
// that one: this tells a dating error from a late reading. t1s (nil, or one
// per T2) are the samples' deliveries: a T2 equal to its T1 was dated by the
// delivery (the agent learnt of the change after the datapath had it).
func WorstMatches(t2s, t1s []time.Time, cs []Commit, win time.Duration, tables []string, n int) []string {
	type worst struct {
		t2, t1 time.Time
		c      Commit
		d      time.Duration // T2 - First, signed
	}
	var ws []worst
	for i, t2 := range t2s {
		c, ok := MatchCommit(cs, t2, win, tables)
		if !ok {
			continue
		}
		w := worst{t2: t2, c: c, d: t2.Sub(firstOf(c))}
		if i < len(t1s) {
			w.t1 = t1s[i]
		}
		ws = append(ws, w)
	}
	sort.SliceStable(ws, func(i, j int) bool { return absDur(ws[i].d) > absDur(ws[j].d) })
	var out []string
	for _, w := range ws[:min(n, len(ws))] {
		s := fmt.Sprintf("T2 %s its commit's first datagram (gen %d, %s, read over %s)",
			signedMS(w.d), w.c.Gen, strings.Join(w.c.Tables, "+"), ms(w.c.At.Sub(firstOf(w.c))))
		if !w.t1.IsZero() {
			s += fmt.Sprintf("; T2 %s its T1 (the delivery)", signedMS(w.t2.Sub(w.t1)))
		}
		if o, ok := nearestCommit(cs, w.t2); ok && o.Gen != w.c.Gen {
			s += fmt.Sprintf("; nearest commit to T2: gen %d (%s), T2 %s its first datagram",
				o.Gen, strings.Join(o.Tables, "+"), signedMS(w.t2.Sub(firstOf(o))))
		}
		out = append(out, s)
	}
	return out
}

// nearestCommit is the commit of any table read nearest to t2 (by span).
func nearestCommit(cs []Commit, t2 time.Time) (Commit, bool) {
	var best Commit
	bestD, found := time.Duration(0), false
	for _, c := range cs {
		if d := spanDist(t2, c.First, c.At); !found || d < bestD {
			best, bestD, found = c, d, true
		}
	}
	return best, found
}

func firstOf(c Commit) time.Time {
	if c.First.IsZero() || c.First.After(c.At) {
		return c.At
	}
	return c.First
}

// signedMS is "3.1 ms after" / "2.0 ms before".
func signedMS(d time.Duration) string {
	if d < 0 {
		return ms(-d) + " before"
	}
	return ms(d) + " after"
}
