package rst

import (
	"encoding/binary"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

func rawEvent(ktime uint64, sender, peer netip.AddrPort, reason uint16, dir, src uint8, id uint32) []byte {
	b := make([]byte, eventSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], ktime)
	s, p := sender.Addr().As16(), peer.Addr().As16()
	copy(b[8:], s[:])
	copy(b[24:], p[:])
	le.PutUint16(b[40:], sender.Port())
	le.PutUint16(b[42:], peer.Port())
	le.PutUint16(b[44:], reason)
	b[46], b[47] = dir, src
	le.PutUint32(b[48:], id)
	return b
}

func TestDecodeEvent(t *testing.T) {
	wall := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	mono := 1000 * time.Second
	sender := netip.MustParseAddrPort("10.1.2.3:8080")
	peer := netip.MustParseAddrPort("[fd00::9]:40000")
	b := rawEvent(uint64(998*time.Second), sender, peer, 1, 1, 1, 42)
	ev, err := decodeEvent(b, newReasonTable(nil), mono, wall)
	if err != nil {
		t.Fatal(err)
	}
	want := Event{Time: wall.Add(-2 * time.Second), Sender: sender, Peer: peer, Direction: SentBy,
		Reason: "NO_SOCKET", ReasonCode: 1, WatchedID: 42, Source: "tracepoint"}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("got %+v\nwant %+v", ev, want)
	}
	ev, _ = decodeEvent(rawEvent(0, sender, peer, ReasonUnknown, 3, 9, 0), newReasonTable(nil), mono, wall)
	if ev.Reason != "UNKNOWN" || ev.Source != "source_9" || ev.Direction.String() != "both_watched" {
		t.Errorf("unknown reason/source: %+v", ev)
	}
	if _, err := decodeEvent(b[:20], nil, mono, wall); err == nil || !strings.Contains(err.Error(), "20 bytes") {
		t.Errorf("short record: %v", err)
	}
}

func TestReasonNames(t *testing.T) {
	tbl := newReasonTable(map[uint16]string{2: "TCP_INVALID_ACK_SEQUENCE", 1: "NO_SOCKET"})
	for code, want := range map[uint16]string{0: "NOT_SPECIFIED", 1: "NO_SOCKET", 2: "TCP_INVALID_ACK_SEQUENCE", 77: "REASON_77", ReasonUnknown: "UNKNOWN"} {
		if got := tbl.name(code); got != want {
			t.Errorf("name(%d) = %q, want %q", code, got, want)
		}
	}
}

var (
	cart       = model.ServiceName{Namespace: "shop", Name: "cart"}
	dnsMetrics = model.ServiceName{Namespace: "kube-system", Name: "kube-dns-metrics"}
)

func testTable(deleted time.Time) Table {
	return Table{
		Addrs: map[netip.Addr]Target{
			netip.MustParseAddr("10.1.2.3"):   {Namespace: "shop", Pod: "cart-7f9", Service: cart, Deleted: deleted},
			netip.MustParseAddr("10.1.2.4"):   {Namespace: "shop", Pod: "orphan-1"},
			netip.MustParseAddr("10.96.0.10"): {Service: model.ServiceName{Namespace: "kube-system", Name: "kube-dns"}},
		},
		AddrPorts: map[netip.AddrPort]Target{
			netip.MustParseAddrPort("10.96.0.10:9153"): {Service: dnsMetrics},
		},
	}
}

func TestAttribute(t *testing.T) {
	del := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	tbl := testTable(del)
	at := del.Add(1500 * time.Millisecond)
	ev := Event{Time: at, Sender: netip.MustParseAddrPort("10.1.2.3:8080"), Peer: netip.MustParseAddrPort("10.9.9.9:51000"),
		Direction: SentBy, Reason: "NO_SOCKET"}
	recs := Attribute(ev, tbl)
	if len(recs) != 1 {
		t.Fatalf("records %+v", recs)
	}
	r := recs[0]
	if r.Namespace != "shop" || r.Pod != "cart-7f9" || r.Service != cart || r.Watched != "10.1.2.3:8080" ||
		r.Client != "10.9.9.9:51000" || r.Direction != "sent_by_watched" || r.SecondsSinceDeletion == nil || *r.SecondsSinceDeletion != 1.5 {
		t.Errorf("record %+v", r)
	}

	// A client's reset toward a VIP: the port picks the service.
	ev = Event{Time: at, Sender: netip.MustParseAddrPort("10.9.9.9:51000"), Peer: netip.MustParseAddrPort("10.96.0.10:9153"), Direction: SentTo}
	recs = Attribute(ev, tbl)
	if len(recs) != 1 || recs[0].Service != dnsMetrics || recs[0].Namespace != "" || recs[0].Pod != "" || recs[0].SecondsSinceDeletion != nil || recs[0].Watched != "10.96.0.10:9153" {
		t.Errorf("VIP record %+v", recs)
	}
	// Both sides watched: two records; unknown address: no attribution.
	ev = Event{Time: at, Sender: netip.MustParseAddrPort("10.1.2.3:80"), Peer: netip.MustParseAddrPort("10.7.7.7:1"), Direction: SentBy | SentTo}
	recs = Attribute(ev, tbl)
	if len(recs) != 2 || recs[0].Service != cart || recs[1].Watched != "10.7.7.7:1" || !recs[1].Service.IsZero() {
		t.Errorf("both-sides records %+v", recs)
	}
}

// TestLedgerTotalsFromCumulativeCounts: the ledger turns cumulative
// per-key counts into per-service totals: an increase counts for the
// service its address stands for, a count that goes down (the address
// unwatched and watched again) restarts from zero, a key not read any more is
// forgotten, an address of no known service counts for its namespace's
// _unknown, an unknown address for _unknown/_unknown.
func TestLedgerTotalsFromCumulativeCounts(t *testing.T) {
	a, orphan, stranger := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.1.2.4"), netip.MustParseAddr("10.5.5.5")
	entries := map[netip.Addr]watchEntry{
		a:      {Target: Target{Namespace: "shop", Pod: "cart-7f9", Service: cart}},
		orphan: {Target: Target{Namespace: "shop", Pod: "orphan-1"}},
	}
	info := func(ip netip.Addr) (watchEntry, bool) { e, ok := entries[ip]; return e, ok }
	key := func(ip netip.Addr, dir Direction) CounterKey {
		return CounterKey{Addr: ip, Dir: dir, State: StateTerminating}
	}
	l := newLedger()
	l.observe(map[CounterKey]uint64{key(a, SentBy): 3, key(a, SentTo): 1, key(orphan, SentBy): 2, key(stranger, SentBy): 1}, info)
	l.observe(map[CounterKey]uint64{key(a, SentBy): 5, key(a, SentTo): 1}, info)      // +2; orphan and stranger gone
	l.observe(map[CounterKey]uint64{key(a, SentBy): 1, key(orphan, SentBy): 4}, info) // a restarted: +1; orphan re-read: +4
	got := map[model.ServiceName]uint64{}
	for k, c := range l.byState() {
		got[k] = c.Terminating
	}
	want := map[model.ServiceName]uint64{
		{Namespace: "shop", Name: "cart"}:             4 + 2 + 1,
		{Namespace: "shop", Name: LabelUnknown}:       2 + 4,
		{Namespace: LabelUnknown, Name: LabelUnknown}: 1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("totals %v, want %v", got, want)
	}
}
