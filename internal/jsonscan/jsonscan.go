// Package jsonscan reads JSON values of one expected form from their bytes,
// for the hot spots of the offline readers where a general decoder's
// reflection costs several times the tokenizing: an nft dnat map, a kubectl
// List's Services and EndpointSlices. A scan accepts only what it can read
// exactly as the decoder it stands in for would (no escapes in strings,
// exact member names, no repeats) and its caller decodes anything else as
// before, so a refusal never changes a result.
//
// What a scan reads token by token (Lit, Str, Name, Member, Bool, Int,
// Digits, Each) it reads strictly: whitespace, strings and numbers as RFC
// 8259 allows them, so a value read that way whole is valid JSON. Skip
// passes over a value by its brackets and quotes without checking its
// syntax: its caller knows the bytes valid already (as
// jsontext.Decoder.ReadValue returns them) or hands them to a validating
// decoder.
package jsonscan

import (
	"encoding/binary"
	"unicode/utf8"
)

// Cursor reads a value token by token.
type Cursor struct {
	b []byte
	i int
}

// New is a cursor at the start of v.
func New(v []byte) Cursor { return Cursor{b: v} }

// ws passes over whitespace (space, tab, newline, carriage return).
// Indentation is read eight spaces at a time.
func (c *Cursor) ws() {
	for c.i < len(c.b) {
		if c.i+8 <= len(c.b) && binary.LittleEndian.Uint64(c.b[c.i:]) == 0x2020202020202020 {
			c.i += 8
			continue
		}
		if !isSpace(c.b[c.i]) {
			return
		}
		c.i++
	}
}

// Lit consumes the structural byte ch ({ } [ ] : ,).
func (c *Cursor) Lit(ch byte) bool {
	c.ws()
	if c.i < len(c.b) && c.b[c.i] == ch {
		c.i++
		return true
	}
	return false
}

// End reports whether only whitespace is left.
func (c *Cursor) End() bool {
	c.ws()
	return c.i == len(c.b)
}

// Str reads a string that holds no escape and no control character and
// is valid UTF-8: its bytes are its value.
func (c *Cursor) Str() ([]byte, bool) {
	if !c.Lit('"') {
		return nil, false
	}
	start, ascii := c.i, true
	for c.i < len(c.b) {
		k := strClass[c.b[c.i]]
		if k == strStop {
			break
		}
		ascii = ascii && k == strASCII
		c.i++
	}
	if c.i == len(c.b) || c.b[c.i] != '"' { // the end, an escape or a control character
		return nil, false
	}
	c.i++
	s := c.b[start : c.i-1]
	return s, ascii || utf8.Valid(s)
}

// Name reads a member name equal to want and its colon.
func (c *Cursor) Name(want string) bool {
	s, ok := c.Str()
	return ok && string(s) == want && c.Lit(':')
}

// Member reads a member name and its colon.
func (c *Cursor) Member() ([]byte, bool) {
	s, ok := c.Str()
	return s, ok && c.Lit(':')
}

// Bool reads true or false.
func (c *Cursor) Bool() (v, ok bool) {
	c.ws()
	switch {
	case c.word("true"):
		return true, true
	case c.word("false"):
		return false, true
	}
	return false, false
}

func (c *Cursor) word(w string) bool {
	if len(c.b)-c.i >= len(w) && string(c.b[c.i:c.i+len(w)]) == w {
		c.i += len(w)
		return true
	}
	return false
}

// Digits reads a number made of decimal digits only, as JSON writes one
// (no leading zero).
func (c *Cursor) Digits() ([]byte, bool) {
	c.ws()
	start := c.i
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		c.i++
	}
	d := c.b[start:c.i]
	if len(d) == 0 || len(d) > 1 && d[0] == '0' || c.i < len(c.b) && (c.b[c.i] == '.' || c.b[c.i] == 'e' || c.b[c.i] == 'E') {
		return nil, false
	}
	return d, true
}

// Skip passes over one value.
func (c *Cursor) Skip() bool {
	c.ws()
	if c.i >= len(c.b) {
		return false
	}
	switch c.b[c.i] {
	case '"':
		return c.skipString()
	case '{', '[':
		depth := 0
		for c.i < len(c.b) {
			switch c.b[c.i] {
			case '"':
				if !c.skipString() {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					c.i++
					return true
				}
			case ' ': // indentation, eight spaces at a time
				if c.i+8 <= len(c.b) && binary.LittleEndian.Uint64(c.b[c.i:]) == 0x2020202020202020 {
					c.i += 8
					continue
				}
			}
			c.i++
		}
		return false
	}
	start := c.i // a number or a literal
	for c.i < len(c.b) && isScalarByte(c.b[c.i]) {
		c.i++
	}
	return c.i > start
}

// skipString passes over a string, escapes included.
func (c *Cursor) skipString() bool {
	for c.i++; c.i < len(c.b); c.i++ {
		switch c.b[c.i] {
		case '\\':
			c.i++
		case '"':
			c.i++
			return true
		}
	}
	return false
}

// isScalarByte: a byte of a number or of true, false or null.
func isScalarByte(ch byte) bool {
	return ch == '-' || ch == '+' || ch == '.' || ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z'
}

func isSpace(ch byte) bool { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r' }

// Int reads an integer as JSON writes one (an optional minus, no leading
// zero, no fraction or exponent) that fits in bits.
func (c *Cursor) Int(bits int) (int64, bool) {
	c.ws()
	neg := c.i < len(c.b) && c.b[c.i] == '-'
	if neg {
		c.i++
	}
	if neg && (c.i == len(c.b) || c.b[c.i] < '0' || c.b[c.i] > '9') {
		return 0, false // Digits would pass over whitespace first
	}
	d, ok := c.Digits()
	if !ok || len(d) > 19 {
		return 0, false
	}
	var u uint64
	for _, ch := range d {
		u = u*10 + uint64(ch-'0')
	}
	limit := uint64(1) << (bits - 1) // -limit .. limit-1
	switch {
	case neg && u <= limit:
		return -int64(u), true
	case !neg && u < limit:
		return int64(u), true
	}
	return 0, false
}

// strClass classifies the bytes of a string: what Str reads as it is,
// where it stops (the closing quote, an escape, a control character), and
// the bytes of non-ASCII UTF-8 (checked whole at the end).
var strClass = func() (t [256]uint8) {
	for i := range t {
		switch {
		case i == '"' || i == '\\' || i < ' ':
			t[i] = strStop
		case i >= utf8.RuneSelf:
			t[i] = strUTF8
		}
	}
	return t
}()

const (
	strASCII = iota
	strStop
	strUTF8
)

// Rest is what is left to read, from the next token on.
func (c *Cursor) Rest() []byte {
	c.ws()
	return c.b[c.i:]
}

// Advance passes over n bytes of Rest (read by another decoder).
func (c *Cursor) Advance(n int) { c.i = min(c.i+n, len(c.b)) }

// Each reads an array or an object (open is '[' or '{'), calling elem to
// read each element or member (a member's name too); false where elem
// refuses or the value is malformed (a missing or trailing comma).
func (c *Cursor) Each(open byte, elem func() bool) bool {
	closing := byte(']')
	if open == '{' {
		closing = '}'
	}
	if !c.Lit(open) {
		return false
	}
	for i := 0; !c.Lit(closing); i++ {
		if i > 0 && !c.Lit(',') || !elem() {
			return false
		}
	}
	return true
}
