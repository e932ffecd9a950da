package nfevents

import (
	"bytes"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// TestOpMemCarve: carved copies hold their bytes, cannot grow into a
// neighbour, and survive the block filling up; a large one gets its own.
func TestOpMemCarve(t *testing.T) {
	m := &opMem{}
	a := m.carve([]byte("first"))
	b := m.carve([]byte("second"))
	_ = append(a, 'X') // must not overwrite b
	if string(a) != "first" || string(b) != "second" || cap(a) != len(a) {
		t.Fatalf("carved %q %q (cap %d)", a, b, cap(a))
	}
	chunk := bytes.Repeat([]byte{7}, opBlock/8)
	var kept [][]byte
	for range 20 { // more than one block
		kept = append(kept, m.carve(chunk))
	}
	if len(m.blocks) < 2 {
		t.Errorf("%d blocks for %d bytes", len(m.blocks), 20*len(chunk))
	}
	for i, k := range kept {
		if !bytes.Equal(k, chunk) {
			t.Fatalf("copy %d changed", i)
		}
	}
	if string(a) != "first" {
		t.Errorf("first copy changed after the blocks grew: %q", a)
	}
	big := m.carve(make([]byte, opBlock))
	if len(big) != opBlock {
		t.Errorf("large copy %d bytes", len(big))
	}
	if c := cap(m.blocks[0]); c != opBlockMin {
		t.Errorf("first block %d bytes, want %d", c, opBlockMin)
	}
	for _, blk := range m.blocks {
		if cap(blk) > opBlock {
			t.Errorf("a block of %d bytes, more than %d", cap(blk), opBlock)
		}
	}
}

// TestOpPoolRelease: a released event's memory is handed out again,
// empty; a second Release (of the same event or of a copy) after it was
// handed out again does not put it back while the new event holds it.
func TestOpPoolRelease(t *testing.T) {
	p := newOpPool()
	nat := TableRef{Family: "ip", Table: "nat"}
	m, tok := p.take(nat)
	m.ops = append(m.ops, Op{Chain: "KUBE-A", Data: m.carve([]byte("rule"))})
	ev := Event{Ops: m.ops, mem: m, memToken: tok, pool: p}
	stale := ev
	ev.Release()
	if ev.Ops != nil || ev.mem != nil {
		t.Error("Release left the event's ops")
	}
	again, tok2 := p.take(nat)
	if again != m || len(again.ops) != 0 || len(again.blocks[0]) != 0 || tok2 == tok {
		t.Fatalf("not reused empty: same %v, %d ops, token %d after %d", again == m, len(again.ops), tok2, tok)
	}
	if cap(again.ops) == 0 || again.ops[:1][0].Data != nil {
		t.Error("reset kept no capacity, or kept a Data reference")
	}
	stale.Release() // the copy: must not give back what the new event holds
	if other, _ := p.take(nat); other == m {
		t.Fatal("a stale Release put back memory in use")
	}
	(&Event{}).Release() // no memory: nothing happens
}

// TestWatcherReusesReleasedOps: across real iptables-nft commits, each
// event's ops are its own transaction's even though the memory of the one
// before, released, is filled again.
func TestWatcherReusesReleasedOps(t *testing.T) {
	ns, w := natOpsWatch(t, "")
	var prev *opMem
	reused := 0
	for i, word := range []string{"alpha", "bravo", "charlie", "delta"} {
		in := "*nat\n:KUBE-SERVICES - [0:0]\n"
		for j := range 50 {
			in += "-A KUBE-SERVICES -d 10.0.0." + string(rune('1'+j%9)) + "/32 -m comment --comment \"" + word + "\" -j ACCEPT\n"
		}
		netnstest.RunInput(t, ns, in+"COMMIT\n", "iptables-nft-restore", "--noflush")
		ev := nftWaitEvent(t, w, func(ev Event) bool { return ev.TouchesTable("ip", "nat") })
		if !ev.OpsComplete || ev.mem == nil {
			t.Fatalf("commit %d: complete %v, memory %v", i, ev.OpsComplete, ev.mem != nil)
		}
		news := 0
		for _, op := range ev.Ops {
			if op.Object != "rule" || op.Op != "new" {
				continue
			}
			news++
			if !strings.Contains(string(op.Data), word) {
				t.Fatalf("commit %d (%s): a NEWRULE without its comment: %q", i, word, op.Data)
			}
		}
		if news != 50 {
			t.Errorf("commit %d: %d NEWRULE ops, want 50", i, news)
		}
		if ev.mem == prev {
			reused++
		}
		prev = ev.mem
		ev.Release()
	}
	if reused < 2 {
		t.Errorf("released memory used again for %d of 3 later commits", reused)
	}
}

// TestOpMemResetTrims: memory handed back keeps what its transaction used,
// not what an earlier, larger one grew it to: a table's rare large
// transaction (a full restore) must not stay kept.
func TestOpMemResetTrims(t *testing.T) {
	m := &opMem{}
	big := make([]byte, 1000)
	large := func() {
		for range 2000 {
			m.ops = append(m.ops, Op{Data: m.carve(big)})
		}
	}
	large()
	n, opCap := len(m.blocks), cap(m.ops)
	m.reset()
	if len(m.blocks) != n || cap(m.ops) != opCap || n < 2 {
		t.Fatalf("a large transaction's memory: %d blocks kept of %d, op capacity %d of %d", len(m.blocks), n, cap(m.ops), opCap)
	}
	m.ops = append(m.ops, Op{Data: m.carve([]byte("small"))}) // a small one in it
	first := cap(m.blocks[0])
	m.reset()
	if len(m.blocks) != 1 || cap(m.blocks[0]) != first || cap(m.ops) != 0 {
		t.Errorf("a small transaction's memory: %d blocks (want 1 of %d bytes), op capacity %d (want 0)",
			len(m.blocks), first, cap(m.ops))
	}
	large() // grows again from there
	if len(m.blocks) != n {
		t.Errorf("the large one again: %d blocks, want %d", len(m.blocks), n)
	}
}

// TestOpPoolPerTable: each table gets back the memory its own last
// transaction filled, whatever order the tables' transactions are read and
// released in (an iptables-nft sync's filter and nat, IPv4 and IPv6).
func TestOpPoolPerTable(t *testing.T) {
	p := newOpPool()
	nat, filter := TableRef{Family: "ip", Table: "nat"}, TableRef{Family: "ip", Table: "filter"}
	mn, tn := p.take(nat)
	mf, tf := p.take(filter)
	for range 500 {
		mn.ops = append(mn.ops, Op{Data: mn.carve(make([]byte, 1000))})
	}
	mf.ops = append(mf.ops, Op{Data: mf.carve([]byte("one"))})
	blocks := len(mn.blocks)
	p.give(mn, tn) // nat released first, then filter
	p.give(mf, tf)
	f2, _ := p.take(filter) // filter read first this time
	n2, _ := p.take(nat)
	if f2 != mf || n2 != mn {
		t.Fatalf("filter got its own memory %v, nat its own %v", f2 == mf, n2 == mn)
	}
	if len(n2.blocks) != blocks {
		t.Errorf("nat's memory kept %d blocks of the %d it filled", len(n2.blocks), blocks)
	}
	if other, _ := p.take(nat); other == mn {
		t.Error("memory in use handed out again")
	}
}
