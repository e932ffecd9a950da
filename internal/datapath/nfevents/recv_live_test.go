package nfevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TestDatagramReaderTruncation: a notification longer than the buffer is
// reported as lost (ENOBUFS, so the watcher resyncs) and grows the buffer;
// the next one is read whole and its messages are the kernel's (a real
// commit in a fresh namespace).
func TestDatagramReaderTruncation(t *testing.T) {
	ns := nftTestNetns(t)
	c := nftEventConn(t, ns)
	r, err := newDatagramReader(c)
	if err != nil {
		t.Fatal(err)
	}
	r.buf = make([]byte, 16) // one netlink header: any notification is longer
	nftIn(t, ns, "nft", "add", "table", "ip", "nd-trunc-a")
	if _, err := r.read(); !errors.Is(err, errTruncated) || !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("short buffer: err %v, want the truncation (ENOBUFS)", err)
	}
	if len(r.buf) <= 16 {
		t.Fatalf("buffer still %d bytes after a truncation", len(r.buf))
	}
	nftIn(t, ns, "nft", "add", "table", "ip", "nd-trunc-b")
	// The truncated datagram may have been the first commit's table message
	// only, its NEWGEN coming on its own: read up to the NEWGEN that
	// follows a table message.
	var tables []string
	for committed, i := false, 0; !committed; i++ {
		if i == 10 {
			t.Fatalf("10 datagrams without nd-trunc-b's commit (tables %v)", tables)
		}
		b, err := r.read()
		if err != nil {
			t.Fatalf("grown buffer: %v", err)
		}
		if err := eachMessage(b, func(m netlink.Message) {
			it, g, ok, err := parseChangeMessage(m)
			switch {
			case err != nil:
				t.Errorf("message: %v", err)
			case ok && g != nil:
				committed = len(tables) > 0
			case ok && it.Object == "table":
				tables = append(tables, it.Table)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(tables) != 1 || tables[0] != "nd-trunc-b" {
		t.Errorf("tables notified after the truncation %v, want [nd-trunc-b]", tables)
	}
}

// TestEachMessageRejectsBadLength: a length past the datagram is an error,
// not a read beyond it.
func TestEachMessageRejectsBadLength(t *testing.T) {
	b := make([]byte, 20)
	b[0] = 40 // claims 40 bytes of 20
	if err := eachMessage(b, func(netlink.Message) { t.Error("handed a message") }); err == nil {
		t.Error("no error for a 40-byte message in 20 bytes")
	}
}

// TestEachMessageMatchesSyscall: the in-place split hands the same
// headers and payloads as syscall.ParseNetlinkMessage, padding included.
func TestEachMessageMatchesSyscall(t *testing.T) {
	msg := func(typ uint16, seq uint32, payload string) []byte {
		n := syscall.NLMSG_HDRLEN + len(payload)
		b := make([]byte, (n+3)&^3)
		binary.NativeEndian.PutUint32(b, uint32(n))
		binary.NativeEndian.PutUint16(b[4:], typ)
		binary.NativeEndian.PutUint16(b[6:], 0x2)
		binary.NativeEndian.PutUint32(b[8:], seq)
		binary.NativeEndian.PutUint32(b[12:], 77)
		copy(b[syscall.NLMSG_HDRLEN:], payload)
		return b
	}
	dgram := append(append(append(msg(0xa06, 1, "abcde"), msg(0xa08, 2, "")...), msg(0xa0f, 3, "12345678")...), 0, 0)
	want, err := syscall.ParseNetlinkMessage(dgram)
	if err != nil {
		t.Fatal(err)
	}
	var got []netlink.Message
	if err := eachMessage(dgram, func(m netlink.Message) { got = append(got, m) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Header.Length != w.Header.Len || uint16(g.Header.Type) != w.Header.Type || uint16(g.Header.Flags) != w.Header.Flags ||
			g.Header.Sequence != w.Header.Seq || g.Header.PID != w.Header.Pid || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("message %d: %+v %q, want %+v %q", i, g.Header, g.Data, w.Header, w.Data)
		}
	}
}
