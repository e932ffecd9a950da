// Package jsonscan reads JSON values of one expected form from their bytes,
// for the hot spots of the offline readers where a general decoder's
// reflection costs several times the tokenizing: an nft dnat map, an
// EndpointSlice's endpoints. A scan accepts only what it can read exactly
// as the decoder it stands in for would (no escapes in strings, exact
// member names, no repeats) and its caller decodes anything else as
// before, so a refusal never changes a result.
//
// The input is a valid JSON value (as jsontext.Decoder.ReadValue returns
// one): the scan checks the form, not the syntax.
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

// ws passes over whitespace: between the tokens of valid JSON, any byte
// up to ' ' is whitespace. Indentation is read eight spaces at a time.
func (c *Cursor) ws() {
	for c.i < len(c.b) && c.b[c.i] <= ' ' {
		if c.i+8 <= len(c.b) && binary.LittleEndian.Uint64(c.b[c.i:]) == 0x2020202020202020 {
			c.i += 8
		} else {
			c.i++
		}
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

// Str reads a string that holds no escape and is valid UTF-8: its bytes
// are its value.
func (c *Cursor) Str() ([]byte, bool) {
	if !c.Lit('"') {
		return nil, false
	}
	start, ascii := c.i, true
	for c.i < len(c.b) && c.b[c.i] != '"' {
		switch ch := c.b[c.i]; {
		case ch == '\\':
			return nil, false
		case ch >= utf8.RuneSelf:
			ascii = false
		}
		c.i++
	}
	if c.i == len(c.b) {
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

// Digits reads a number made of decimal digits only.
func (c *Cursor) Digits() ([]byte, bool) {
	c.ws()
	start := c.i
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		c.i++
	}
	if c.i == start || c.i < len(c.b) && (c.b[c.i] == '.' || c.b[c.i] == 'e' || c.b[c.i] == 'E') {
		return nil, false
	}
	return c.b[start:c.i], true
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
