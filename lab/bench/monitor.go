package bench

import (
	"math"
	"time"
)

// The kernel-side reference for lag precision: the harness itself listens
// to the nf_tables notifications of the lab node's namespace (an nfnetlink
// socket bound to the NFNLGRP_NFTABLES group, monitor_nl.go). The kernel
// multicasts each transaction's object messages and then its NFT_MSG_NEWGEN
// at the commit, the message the agent dates its T2 by; the harness stamps
// each datagram with time.Now() as it reads it. So the reference is the
// commit's multicast plus the harness's own wake-up, and none of
// kube-proxy's post-commit work.
//
// It reads netlink itself rather than the text of `nft monitor`: at 100,000
// endpoints in iptables-nft mode that tool prints a sync's transaction too
// slowly and at too high a CPU cost (on the machine the two measured
// processes share) to serve as a reference.

// monitorMatchWindow bounds |T2 - commit| for a sample to be matched to a
// commit. kube-proxy's IPv4 proxier commits at most once a second (default
// minimum sync period 1 s), so ±50 ms cannot pick a neighbouring commit of
// that proxier, and it is 2.5x the 20 ms precision goal: an agent error
// beyond it is counted as unmatched rather than hidden.
const monitorMatchWindow = 50 * time.Millisecond

// Commit is one nf_tables transaction as the listener read it.
type Commit struct {
	Gen     uint32
	PID     int       // -1 when the NEWGEN names no process
	Process string    // the committing process's comm (15 characters at most)
	At      time.Time // when the harness read the datagram holding the NEWGEN
	// First is when it read the transaction's first datagram (At when the
	// NEWGEN came alone): At - First is the harness's time receiving the
	// transaction's messages, all queued together at the commit.
	First time.Time
	// Tables are the "family table" pairs the transaction's object messages
	// named, in the order first seen.
	Tables []string
}

// Touches reports whether the commit named one of tables.
func (c Commit) Touches(tables []string) bool {
	for _, t := range c.Tables {
		for _, w := range tables {
			if t == w {
				return true
			}
		}
	}
	return false
}

// MatchCommit returns the commit of cs that touched one of tables and was
// read nearest to t2, within ±win (inclusive). Nearness is to the span the
// listener took reading the transaction (First to At; zero inside it), so
// a large transaction's receiving time (its messages at 10k+ endpoints in
// iptables-nft mode) does not push its commit out of the window. ok is
// false when none is.
func MatchCommit(cs []Commit, t2 time.Time, win time.Duration, tables []string) (Commit, bool) {
	var best Commit
	bestD := time.Duration(math.MaxInt64)
	for _, c := range cs {
		d := spanDist(t2, c.First, c.At)
		if d > win || d >= bestD || !c.Touches(tables) {
			continue
		}
		best, bestD = c, d
	}
	return best, bestD != time.Duration(math.MaxInt64)
}

// spanDist is how far t2 is from [first, at] (first zero: at).
func spanDist(t2, first, at time.Time) time.Duration {
	first = firstOf(Commit{First: first, At: at})
	switch {
	case t2.Before(first):
		return first.Sub(t2)
	case t2.After(at):
		return t2.Sub(at)
	}
	return 0
}

// MonitorMatch is the lag precision of one window's samples against the
// monitor's commits.
type MonitorMatch struct {
	Diffs     []time.Duration // |T2 - commit read|, one per matched sample
	Unmatched int             // samples with no commit within the window
	T2After   int             // matched samples whose T2 is at or after the listener's reading
	Spans     []time.Duration // the matched commits' At - First (receiving their messages)
	FromFirst []time.Duration // |T2 - First|: against the read of the transaction's first line
}

// MatchSamples matches each T2 to its commit (MatchCommit).
func MatchSamples(t2s []time.Time, cs []Commit, win time.Duration, tables []string) MonitorMatch {
	var m MonitorMatch
	for _, t2 := range t2s {
		c, ok := MatchCommit(cs, t2, win, tables)
		if !ok {
			m.Unmatched++
			continue
		}
		d := t2.Sub(c.At)
		if d >= 0 {
			m.T2After++
		}
		m.Diffs = append(m.Diffs, absDur(d))
		first := c.First
		if first.IsZero() {
			first = c.At
		}
		m.Spans = append(m.Spans, c.At.Sub(first))
		m.FromFirst = append(m.FromFirst, absDur(t2.Sub(first)))
	}
	return m
}

// ProxyTables are the IPv4 tables in which kube-proxy programs an endpoint
// change in mode (nil: no nf_tables, iptables-legacy): the commits a sample
// may be matched to. Its IPv6 proxier's commits (same process names) are
// left out by table. In iptables-nft mode iptables-nft-restore commits each
// table of a sync on its own, filter then nat; the churn's changes (an
// endpoint address replaced) are programmed in nat's KUBE-SVC/KUBE-SEP
// chains, so the filter commit of the same sync is not a candidate.
func ProxyTables(mode string) []string {
	switch mode {
	case "nftables":
		return []string{"ip kube-proxy"}
	case "iptables-nft":
		return []string{"ip nat"}
	}
	return nil
}
