package nfevents

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
)

// nftTestMsg builds an nf_tables notification: nfgenmsg + attributes.
func nftTestMsg(t *testing.T, typ uint16, family uint8, attrs ...netlink.Attribute) netlink.Message {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	for _, a := range attrs {
		ae.Bytes(a.Type, a.Data)
	}
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(nfnlSubsysNFTables<<8 | typ)},
		Data:   append([]byte{family, 0, 0, 0}, b...),
	}
}

func nftStr(typ uint16, s string) netlink.Attribute {
	return netlink.Attribute{Type: typ, Data: append([]byte(s), 0)}
}

func nftU32(typ uint16, v uint32) netlink.Attribute {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, v)
	return netlink.Attribute{Type: typ, Data: b}
}

func TestParseChangeMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  netlink.Message
		item Change
		gen  *nftGenInfo
		ok   bool
	}{
		{"new rule", nftTestMsg(t, nftMsgNewRule, 2, nftStr(1, "kube-proxy"), nftStr(2, "service-X")),
			Change{Family: "ip", Table: "kube-proxy", Object: "rule", Name: "service-X", Op: "new", Count: 1}, nil, true},
		{"del chain ip6", nftTestMsg(t, nftMsgDelChain, 10, nftStr(1, "kube-proxy"), nftStr(3, "endpoint-Y")),
			Change{Family: "ip6", Table: "kube-proxy", Object: "chain", Name: "endpoint-Y", Op: "del", Count: 1}, nil, true},
		{"set elements", nftTestMsg(t, nftMsgDelSetElem, 2, nftStr(1, "kube-proxy"), nftStr(2, "service-ips")),
			Change{Family: "ip", Table: "kube-proxy", Object: "element", Name: "service-ips", Op: "del", Count: 1}, nil, true},
		{"iptables-nft table", nftTestMsg(t, nftMsgNewTable, 2, nftStr(1, "nat")),
			Change{Family: "ip", Table: "nat", Object: "table", Op: "new", Count: 1}, nil, true},
		{"generation", nftTestMsg(t, nftMsgNewGen, 0, nftU32(1, 42), nftU32(2, 1234), nftStr(3, "kube-proxy")),
			Change{}, &nftGenInfo{ID: 42, PID: 1234, Process: "kube-proxy"}, true},
		{"other subsystem", netlink.Message{Header: netlink.Header{Type: 3 << 8}, Data: []byte{2, 0, 0, 0}}, Change{}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			item, gen, ok, err := parseChangeMessage(tc.msg)
			if err != nil || ok != tc.ok || item != tc.item || !reflect.DeepEqual(gen, tc.gen) {
				t.Errorf("got %+v %+v %v %v, want %+v %+v %v", item, gen, ok, err, tc.item, tc.gen, tc.ok)
			}
		})
	}
	if _, _, _, err := parseChangeMessage(netlink.Message{Header: netlink.Header{Type: nfnlSubsysNFTables<<8 | nftMsgNewRule}, Data: []byte{2}}); err == nil {
		t.Error("truncated message: want an error")
	}
	if _, _, _, err := parseChangeMessage(netlink.Message{Header: netlink.Header{Type: nfnlSubsysNFTables<<8 | nftMsgNewRule}, Data: []byte{2, 0, 0, 0, 9, 0}}); err == nil {
		t.Error("malformed attributes: want an error")
	}
}

func TestChangeBatchAndEvent(t *testing.T) {
	var b changeBatch
	for _, it := range []Change{
		{Family: "ip", Table: "kube-proxy", Object: "element", Name: "service-ips", Op: "new"},
		{Family: "ip", Table: "kube-proxy", Object: "element", Name: "service-ips", Op: "new"},
		{Family: "ip", Table: "kube-proxy", Object: "rule", Name: "service-B", Op: "new"},
		{Family: "ip", Table: "kube-proxy", Object: "chain", Name: "service-A", Op: "del"},
		{Family: "ip", Table: "nat", Object: "rule", Name: "KUBE-SERVICES", Op: "new"},
		{Family: "ip6", Table: "kube-proxy", Object: "set", Name: "cluster-ips", Op: "new"},
	} {
		b.add(it)
	}
	ev := Event{Changes: b.flush()}
	if len(ev.Changes) != 5 || ev.Changes[0].Count != 1 {
		t.Fatalf("changes %+v", ev.Changes)
	}
	var elems Change
	for _, c := range ev.Changes {
		if c.Object == "element" {
			elems = c
		}
	}
	if elems.Count != 2 {
		t.Errorf("element change counted %d times, want 2", elems.Count)
	}
	if got := ev.Chains("ip", "kube-proxy"); !reflect.DeepEqual(got, []string{"service-A", "service-B"}) {
		t.Errorf("Chains = %v", got)
	}
	if got := ev.Sets("ip", "kube-proxy"); !reflect.DeepEqual(got, []string{"service-ips"}) {
		t.Errorf("Sets = %v", got)
	}
	if !ev.TouchesTable("ip", "nat") || ev.TouchesTable("ip6", "nat") {
		t.Error("TouchesTable wrong")
	}
	if b.flush(); len(b.items) != 0 {
		t.Error("flush did not empty the batch")
	}
}

// TestEventDatedByFirstMessage: an event is dated by the read of its
// transaction's first message, not by the later read of its NEWGEN (the
// watcher decodes every message in between); a NEWGEN alone is dated by
// its own read.
func TestEventDatedByFirstMessage(t *testing.T) {
	w := &Watcher{events: make(chan Event, 2)}
	var b changeBatch
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	rule := nftTestMsg(t, nftMsgNewRule, 2, nftStr(1, "nat"), nftStr(2, "KUBE-SVC-X"))
	gen := func(id uint32) netlink.Message { return nftTestMsg(t, nftMsgNewGen, 0, nftU32(nftaGenID, id)) }
	w.handle(rule, &b, t0)
	w.handle(rule, &b, t0.Add(40*time.Millisecond))
	w.handle(gen(7), &b, t0.Add(90*time.Millisecond))
	w.handle(gen(8), &b, t0.Add(2*time.Second))
	for i, want := range []time.Time{t0, t0.Add(2 * time.Second)} {
		ev := <-w.events
		if !ev.Received.Equal(want) {
			t.Errorf("event %d (generation %d): received %s, want %s", i, ev.Generation, ev.Received.Format(time.StampMilli), want.Format(time.StampMilli))
		}
	}
}
