package iptables

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nlMsg is one netlink message: header and payload, padded.
func nlMsg(typ, flags uint16, seq uint32, data []byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(data)+3)
	binary.NativeEndian.PutUint32(b, uint32(unix.NLMSG_HDRLEN+len(data)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func errMsg(seq uint32, errno unix.Errno) []byte {
	return nlMsg(unix.NLMSG_ERROR, 0, seq, binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno))))
}

// pairConn is an nlConn reading datagrams the test writes to w.
func pairConn(t *testing.T) (*nlConn, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return &nlConn{fd: fds[0], buf: make([]byte, nlRecvBuffer)}, fds[1]
}

type gotMsg struct {
	typ, flags uint16
	data       string
}

// TestNLConnReceiveDump: a dump's answer spans datagrams; messages of an
// earlier sequence are skipped; NLMSG_DONE ends it; a callback error is
// returned once the answer was read whole, so the next answer is intact.
func TestNLConnReceiveDump(t *testing.T) {
	c, w := pairConn(t)
	const typ = nfnlSubsysNFTables<<8 | nftMsgNewRule
	writes := [][]byte{
		slices.Concat(nlMsg(typ, unix.NLM_F_MULTI, 6, []byte("stale")), nlMsg(typ, unix.NLM_F_MULTI, 7, []byte("one"))),
		slices.Concat(nlMsg(typ, unix.NLM_F_MULTI|unix.NLM_F_DUMP_INTR, 7, []byte("two")), nlMsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, 7, make([]byte, 4))),
		slices.Concat(nlMsg(typ, 0, 8, []byte("next")), nlMsg(unix.NLMSG_DONE, 0, 8, make([]byte, 4))),
	}
	for _, b := range writes {
		if _, err := unix.Write(w, b); err != nil {
			t.Fatal(err)
		}
	}
	var got []gotMsg
	err := c.receive(7, true, func(typ, flags uint16, data []byte) error {
		got = append(got, gotMsg{typ, flags, string(data)})
		if flags&unix.NLM_F_DUMP_INTR != 0 {
			return errDumpInterrupted
		}
		return nil
	})
	want := []gotMsg{{typ, unix.NLM_F_MULTI, "one"}, {typ, unix.NLM_F_MULTI | unix.NLM_F_DUMP_INTR, "two"}}
	if !errors.Is(err, errDumpInterrupted) || !slices.Equal(got, want) {
		t.Fatalf("receive: %v, %v; want %v, %v", err, got, errDumpInterrupted, want)
	}
	got = nil
	if err := c.receive(8, true, func(typ, flags uint16, data []byte) error {
		got = append(got, gotMsg{typ, flags, string(data)})
		return nil
	}); err != nil || len(got) != 1 || got[0].data != "next" {
		t.Fatalf("next answer: %v, %v", err, got)
	}
}

// TestNLConnReceiveErrors: an error message is its errno; a request that
// is not a dump ends with the first datagram that answers it.
func TestNLConnReceiveErrors(t *testing.T) {
	c, w := pairConn(t)
	for _, b := range [][]byte{errMsg(3, unix.ENOENT), nlMsg(99, 0, 4, []byte("gen")), errMsg(5, 0)} {
		if _, err := unix.Write(w, b); err != nil {
			t.Fatal(err)
		}
	}
	none := func(uint16, uint16, []byte) error { return nil }
	if err := c.receive(3, true, none); !errors.Is(err, unix.ENOENT) {
		t.Errorf("error message: %v, want ENOENT", err)
	}
	var got string
	if err := c.receive(4, false, func(_, _ uint16, d []byte) error { got = string(d); return nil }); err != nil || got != "gen" {
		t.Errorf("single answer: %v, %q", err, got)
	}
	if err := c.receive(5, false, none); err != nil {
		t.Errorf("acknowledgement: %v", err)
	}
	if _, err := unix.Write(w, []byte{200, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if err := c.receive(9, true, none); err == nil {
		t.Error("a message longer than its datagram was accepted")
	}
}

// TestNLAttrsMatchesNetlink: the in-place attribute walk reads what the
// netlink library's decoder reads, and refuses what it refuses.
func TestNLAttrsMatchesNetlink(t *testing.T) {
	enc := netlink.NewAttributeEncoder()
	enc.String(1, "KUBE-SVC-ABC")
	enc.Uint32(2, 7)
	enc.Uint64(3, 1<<40)
	enc.Bytes(4, []byte{1, 2, 3})
	enc.Bytes(5, nil)
	enc.Nested(6, func(ne *netlink.AttributeEncoder) error { ne.String(1, "x\x00\x00"); return nil })
	good, err := enc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	inputs := [][]byte{good, good[:len(good)-1], {3, 0, 1, 0}, {0, 0, 1, 0, 8, 0, 2, 0, 1, 2, 3, 4}, {8, 0, 1}, nil}
	for i, in := range inputs {
		want, werr := netlink.NewAttributeDecoder(in)
		got, gerr := newAttrs(in)
		if (werr == nil) != (gerr == nil) {
			t.Errorf("input %d: netlink %v, in place %v", i, werr, gerr)
			continue
		}
		if werr != nil {
			continue
		}
		for {
			wn, gn := want.Next(), got.Next()
			if wn != gn {
				t.Fatalf("input %d: Next %v vs %v", i, wn, gn)
			}
			if !wn {
				break
			}
			if want.Type() != got.Type() || !bytes.Equal(want.Bytes(), got.Bytes()) || want.String() != got.String() {
				t.Errorf("input %d: attribute %d %q %q vs %d %q %q", i, want.Type(), want.Bytes(), want.String(), got.Type(), got.Bytes(), got.String())
			}
			switch len(got.Bytes()) {
			case 4:
				if want.Uint32() != got.Uint32() {
					t.Errorf("input %d: Uint32", i)
				}
			case 8:
				if want.Uint64() != got.Uint64() {
					t.Errorf("input %d: Uint64", i)
				}
			}
		}
		if (want.Err() == nil) != (got.Err() == nil) {
			t.Errorf("input %d: Err %v vs %v", i, want.Err(), got.Err())
		}
	}
	ad, _ := newAttrs(good)
	ad.Next()
	if ad.Uint32(); ad.Err() == nil {
		t.Error("a 13-byte attribute read as a uint32")
	}
}

// TestAppendStrAttr: request attributes are encoded as the netlink library
// encodes them.
func TestAppendStrAttr(t *testing.T) {
	for _, s := range []string{"", "nat", "KUBE-SEP-ABCDEFGHIJKLMNOP"} {
		want, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: nftaRuleChain, Data: cstr(s)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendStrAttr(nil, nftaRuleChain, s); !bytes.Equal(got, want) {
			t.Errorf("%q: %x, want %x", s, got, want)
		}
	}
}
