package iptables

import "time"

// pathState is the fallback bookkeeping of one preferred read path of the
// iptables mode (netlink, in-process legacy, iptables-save): why it is not
// used, since when, and when it is tried again. Its zero value is a path
// in use.
type pathState struct {
	off   string    // why the path is not used ("" = it is)
	since time.Time // since when off is set (the first failure of a streak)
	retry time.Time // when to try the path again
}

// failed records a failed read of the path at now, to be tried again at retry.
func (p *pathState) failed(err error, now, retry time.Time) {
	if p.off == "" {
		p.since = now
	}
	p.off, p.retry = err.Error(), retry
}

// succeeded records a read of the path that served.
func (p *pathState) succeeded() { p.off = "" }

// usable reports whether the path is to be tried at now: in use, or its
// retry is due.
func (p *pathState) usable(now time.Time) bool { return p.off == "" || !now.Before(p.retry) }

// inForce reports whether a fallback from the path is in force.
func (p *pathState) inForce() bool { return p.off != "" }
