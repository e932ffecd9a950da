package rst

import (
	"net/netip"
	"sort"
	"time"

	"github.com/netdrift/netdrift/internal/metrics/servicecap"
	"github.com/netdrift/netdrift/internal/model"
)

// Target is what a watched address stands for, as the agent knows it: a pod
// (terminating or recently deleted), or a Service VIP.
type Target struct {
	Namespace string // the pod's; "" for a Service VIP
	Pod       string // "" for a Service VIP
	// Service is the service the pod is an endpoint of, or the VIP's; zero
	// when the pod backs no known service.
	Service model.ServiceName
	// Deleted is when the pod's deletion was requested (deletionTimestamp
	// minus the grace period); zero when not (yet) deleted.
	Deleted time.Time
}

// Table is the lookup the agent feeds to attribution. AddrPorts (VIP:port ->
// service) is consulted before Addrs (pod IP -> pod), so a VIP on several
// ports maps to the right service.
type Table struct {
	Addrs     map[netip.Addr]Target
	AddrPorts map[netip.AddrPort]Target
}

// Lookup finds the target of an address and port.
func (t Table) Lookup(ap netip.AddrPort) (Target, bool) {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if tg, ok := t.AddrPorts[ap]; ok {
		return tg, true
	}
	tg, ok := t.Addrs[ap.Addr()]
	return tg, ok
}

// Record is one attributed reset event (a sample: events are rate-limited).
// internal/api serves it in /v1/rsts.
type Record struct {
	Time      time.Time
	Direction string // sent_by_watched | sent_to_watched
	Reason    string
	// Watched is the watched side (the pod or VIP), Client the other side.
	Watched   string
	Client    string
	Namespace string // the pod's; "" for a Service VIP
	Pod       string
	Service   model.ServiceName // zero when no service is known
	// SecondsSinceDeletion is the reset's time minus the pod's deletion
	// request (negative: before it); nil when not deleted.
	SecondsSinceDeletion *float64
}

// Attribute turns one event into records, one per watched side.
func Attribute(ev Event, tbl Table) []Record {
	var out []Record
	if ev.Direction&SentBy != 0 {
		out = append(out, attributeSide(ev, SentBy, ev.Sender, ev.Peer, tbl))
	}
	if ev.Direction&SentTo != 0 {
		out = append(out, attributeSide(ev, SentTo, ev.Peer, ev.Sender, tbl))
	}
	return out
}

func attributeSide(ev Event, dir Direction, watched, client netip.AddrPort, tbl Table) Record {
	r := Record{
		Time:      ev.Time,
		Direction: dir.String(),
		Reason:    ev.Reason,
		Watched:   watched.String(),
		Client:    client.String(),
	}
	tg, ok := tbl.Lookup(watched)
	if !ok {
		return r
	}
	r.Namespace, r.Pod, r.Service = tg.Namespace, tg.Pod, tg.Service
	if !tg.Deleted.IsZero() {
		s := ev.Time.Sub(tg.Deleted).Seconds()
		r.SecondsSinceDeletion = &s
	}
	return r
}

// Labels used when a reset cannot be attributed or the series cap is hit.
const (
	LabelUnknown = "_unknown"
	LabelOther   = servicecap.Other
)

func sortAddrs(a []netip.Addr) {
	sort.Slice(a, func(i, j int) bool { return a[i].Less(a[j]) })
}
