package nfevents

import "testing"

// TestGenConnKeepsItsSocket: a GenConn answers what a one-shot Generation
// answers, over one socket across queries and commits; a socket that went
// bad is replaced by the retry; Close makes the next query open a new one.
func TestGenConnKeepsItsSocket(t *testing.T) {
	ns := nftTestNetns(t)
	g := GenConn{NetNS: ns}
	defer g.Close()
	first, err := g.Generation()
	if err != nil {
		t.Fatal(err)
	}
	kept := g.c
	if kept == nil {
		t.Fatal("no socket kept after a query")
	}
	nftIn(t, ns, "nft", "add", "table", "ip", "genconn-test")
	after, err := g.Generation()
	if err != nil {
		t.Fatal(err)
	}
	oneShot, err := Generation(ns)
	if err != nil {
		t.Fatal(err)
	}
	if after <= first || after != oneShot {
		t.Errorf("generation %d before a commit, %d after, one-shot query %d: want it to grow and match", first, after, oneShot)
	}
	if g.c != kept {
		t.Error("a second query opened a new socket")
	}

	_ = kept.Close() // the socket fails under the GenConn: the retry opens another
	again, err := g.Generation()
	if err != nil {
		t.Fatalf("query after the socket failed: %v (want one retry on a new socket)", err)
	}
	if again != after || g.c == nil || g.c == kept {
		t.Errorf("after a failed socket: generation %d (want %d), socket replaced %v", again, after, g.c != kept)
	}

	if err := g.Close(); err != nil || g.c != nil {
		t.Fatalf("Close: %v, socket still kept %v", err, g.c != nil)
	}
	if id, err := g.Generation(); err != nil || id != after || g.c == nil {
		t.Errorf("query after Close: %d, %v (want %d on a new socket)", id, err, after)
	}
}
