package nftables

import (
	"bytes"
	"encoding/json"
	"net/netip"

	"github.com/go-json-experiment/json/jsontext"
)

// nftJSONDNATAddr is a dnat statement's "addr": a string, or an anonymous
// map of [key, {"concat": [address, port]}] elements (kube-proxy's random
// endpoint selection, `dnat to numgen random mod N map { 0 : a . p, ... }`).
// The map is read as the statement is decoded, by a scan of its bytes for
// exactly that form (scanDNATMap); anything else is kept as it is and
// decoded by addJSONDNAT as before. Decoding the map as [][]RawMessage and
// each concat again was ~40 % of an offline diff's nft JSON parse at 10k
// endpoints.
type nftJSONDNATAddr struct {
	raw     json.RawMessage  // the value when not scanned
	targets []netip.AddrPort // the map's address . port values, when scanned
	scanned bool
}

// UnmarshalJSONFrom is the decoding's (encoding/json/v2).
func (a *nftJSONDNATAddr) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	a.set(v)
	return nil
}

// UnmarshalJSON is encoding/json's (the decoding that words errors).
func (a *nftJSONDNATAddr) UnmarshalJSON(b []byte) error {
	a.set(b)
	return nil
}

func (a *nftJSONDNATAddr) set(v []byte) {
	if t, ok := scanDNATMap(v); ok {
		*a = nftJSONDNATAddr{targets: t, scanned: true}
		return
	}
	*a = nftJSONDNATAddr{raw: bytes.Clone(v)}
}

// scanDNATMap reads {"map": {"key": K, "data": {"set": [[K, {"concat":
// [ADDRESS, PORT]}], ...]}}} (whitespace anywhere, key and data in either
// order, K any value, PORT a number) from v, a valid JSON value, into the
// address . port targets, as addJSONDNAT's decoding does. ok is false for
// any other form (names in another letter case, a repeated or unknown
// member, escapes in strings, a port given as a string, an address that
// does not parse...): the caller decodes those as before, so a false here
// never changes a result.
func scanDNATMap(v []byte) (targets []netip.AddrPort, ok bool) {
	c := jsonCursor{b: v}
	if !c.lit('{') || !c.name("map") || !c.lit('{') {
		return nil, false
	}
	var seenKey, seenData bool
	for {
		k, ok := c.str()
		if !ok || !c.lit(':') {
			return nil, false
		}
		switch {
		case string(k) == "key" && !seenKey:
			seenKey = c.skip()
			if !seenKey {
				return nil, false
			}
		case string(k) == "data" && !seenData:
			if targets, seenData = c.concatSet(); !seenData {
				return nil, false
			}
		default:
			return nil, false
		}
		if c.lit('}') {
			break
		}
		if !c.lit(',') {
			return nil, false
		}
	}
	if !seenData || !c.lit('}') || !c.end() {
		return nil, false
	}
	return targets, true
}

// concatSet reads {"set": [[K, {"concat": [ADDRESS, PORT]}], ...]}.
func (c *jsonCursor) concatSet() ([]netip.AddrPort, bool) {
	if !c.lit('{') || !c.name("set") || !c.lit('[') {
		return nil, false
	}
	var out []netip.AddrPort
	if c.lit(']') {
		return out, c.lit('}')
	}
	for {
		if !c.lit('[') || !c.skip() || !c.lit(',') || !c.lit('{') || !c.name("concat") || !c.lit('[') {
			return nil, false
		}
		addr, ok := c.str()
		if !ok || !c.lit(',') {
			return nil, false
		}
		port, ok := c.digits()
		if !ok || !c.lit(']') || !c.lit('}') || !c.lit(']') {
			return nil, false
		}
		ap, err := nftAddrPortFromParts([]string{string(addr), string(port)})
		if err != nil {
			return nil, false
		}
		out = append(out, ap)
		if c.lit(']') {
			return out, c.lit('}')
		}
		if !c.lit(',') {
			return nil, false
		}
	}
}

// jsonCursor reads a valid JSON value token by token, for the forms the
// scans above accept.
type jsonCursor struct {
	b []byte
	i int
}

func (c *jsonCursor) ws() {
	for c.i < len(c.b) && (c.b[c.i] == ' ' || c.b[c.i] == '\t' || c.b[c.i] == '\n' || c.b[c.i] == '\r') {
		c.i++
	}
}

// lit consumes the structural byte ch.
func (c *jsonCursor) lit(ch byte) bool {
	c.ws()
	if c.i < len(c.b) && c.b[c.i] == ch {
		c.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (c *jsonCursor) end() bool {
	c.ws()
	return c.i == len(c.b)
}

// str reads a string without escapes (its bytes are its value).
func (c *jsonCursor) str() ([]byte, bool) {
	if !c.lit('"') {
		return nil, false
	}
	start := c.i
	for c.i < len(c.b) && c.b[c.i] != '"' {
		if c.b[c.i] == '\\' {
			return nil, false
		}
		c.i++
	}
	if c.i == len(c.b) {
		return nil, false
	}
	c.i++
	return c.b[start : c.i-1], true
}

// name reads a member name equal to want and its colon.
func (c *jsonCursor) name(want string) bool {
	s, ok := c.str()
	return ok && string(s) == want && c.lit(':')
}

// digits reads a number made of decimal digits only.
func (c *jsonCursor) digits() ([]byte, bool) {
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

// skip passes over one value (the input is valid JSON).
func (c *jsonCursor) skip() bool {
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
func (c *jsonCursor) skipString() bool {
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
