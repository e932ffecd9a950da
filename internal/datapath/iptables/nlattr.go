package iptables

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// nlAttrs walks netlink attributes in place: Bytes is a slice of the
// message, not a copy; String copies. The decoder of
// github.com/mdlayher/netlink allocates itself and copies each attribute's
// data twice: with a few rules per endpoint of some twenty attributes
// each, most of a full read's allocations. Its methods are the subset of
// that decoder the reader used, with the same meaning.
type nlAttrs struct {
	b         []byte // what is left
	typ       uint16
	data      []byte
	err       error
	ByteOrder binary.ByteOrder // of Uint32 and Uint64; native by default
}

var errBadAttribute = errors.New("netlink: invalid attribute")

const nlaHeader = 4

// newAttrs checks that b holds a header at each attribute's start; a
// length that does not fit is an error of Next (Err), as in the library.
func newAttrs(b []byte) (nlAttrs, error) {
	for rest := b; len(rest) > 0; {
		if len(rest) < nlaHeader {
			return nlAttrs{}, errBadAttribute
		}
		n := int(binary.NativeEndian.Uint16(rest))
		rest = rest[min(len(rest), max(nlaHeader, (n+3)&^3)):]
	}
	return nlAttrs{b: b, ByteOrder: binary.NativeEndian}, nil
}

// Next moves to the next attribute; false at the end or after an error.
func (a *nlAttrs) Next() bool {
	if a.err != nil || len(a.b) == 0 {
		return false
	}
	if len(a.b) < nlaHeader {
		a.err = errBadAttribute
		return false
	}
	n := int(binary.NativeEndian.Uint16(a.b))
	if n > len(a.b) || n != 0 && n < nlaHeader {
		a.err = errBadAttribute
		return false
	}
	a.typ = binary.NativeEndian.Uint16(a.b[2:]) & 0x3fff // without the nested / byte-order flags
	a.data = a.b[nlaHeader:max(nlaHeader, n)]
	a.b = a.b[min(len(a.b), max(nlaHeader, (n+3)&^3)):]
	return true
}

func (a *nlAttrs) Type() uint16 { return a.typ }

// Bytes is the attribute's data, in place: valid as long as the message.
func (a *nlAttrs) Bytes() []byte { return a.data }

// String is the data as a string, trailing NULs removed.
func (a *nlAttrs) String() string {
	d := a.data
	for len(d) > 0 && d[len(d)-1] == 0 {
		d = d[:len(d)-1]
	}
	return string(d)
}

func (a *nlAttrs) Uint32() uint32 {
	if len(a.data) != 4 {
		a.fail("uint32")
		return 0
	}
	return a.ByteOrder.Uint32(a.data)
}

func (a *nlAttrs) Uint64() uint64 {
	if len(a.data) != 8 {
		a.fail("uint64")
		return 0
	}
	return a.ByteOrder.Uint64(a.data)
}

func (a *nlAttrs) fail(what string) {
	if a.err == nil {
		a.err = fmt.Errorf("netlink: attribute %d is not a %s; length: %d", a.typ, what, len(a.data))
	}
}

func (a *nlAttrs) Err() error { return a.err }
