package nftables

import (
	"bytes"
	"encoding/json"
	"net/netip"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/netdrift/netdrift/internal/jsonscan"
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
// never changes a result (internal/jsonscan).
func scanDNATMap(v []byte) (targets []netip.AddrPort, ok bool) {
	c := jsonscan.New(v)
	if !c.Lit('{') || !c.Name("map") || !c.Lit('{') {
		return nil, false
	}
	var seenKey, seenData bool
	for {
		k, ok := c.Str()
		if !ok || !c.Lit(':') {
			return nil, false
		}
		switch {
		case string(k) == "key" && !seenKey:
			seenKey = c.Skip()
			if !seenKey {
				return nil, false
			}
		case string(k) == "data" && !seenData:
			if targets, seenData = concatSet(&c); !seenData {
				return nil, false
			}
		default:
			return nil, false
		}
		if c.Lit('}') {
			break
		}
		if !c.Lit(',') {
			return nil, false
		}
	}
	if !seenData || !c.Lit('}') || !c.End() {
		return nil, false
	}
	return targets, true
}

// concatSet reads {"set": [[K, {"concat": [ADDRESS, PORT]}], ...]}.
func concatSet(c *jsonscan.Cursor) ([]netip.AddrPort, bool) {
	if !c.Lit('{') || !c.Name("set") || !c.Lit('[') {
		return nil, false
	}
	var out []netip.AddrPort
	if c.Lit(']') {
		return out, c.Lit('}')
	}
	for {
		if !c.Lit('[') || !c.Skip() || !c.Lit(',') || !c.Lit('{') || !c.Name("concat") || !c.Lit('[') {
			return nil, false
		}
		addr, ok := c.Str()
		if !ok || !c.Lit(',') {
			return nil, false
		}
		port, ok := c.Digits()
		if !ok || !c.Lit(']') || !c.Lit('}') || !c.Lit(']') {
			return nil, false
		}
		ap, err := nftAddrPortFromParts([]string{string(addr), string(port)})
		if err != nil {
			return nil, false
		}
		out = append(out, ap)
		if c.Lit(']') {
			return out, c.Lit('}')
		}
		if !c.Lit(',') {
			return nil, false
		}
	}
}
