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
// decoded by addJSONDNAT. Decoding the map as [][]RawMessage and each
// concat again would be a large share of an offline diff's nft JSON parse
// (see BENCHMARKS.md, "Offline diff vs the iptables-save that produced the
// dump").
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
// does not parse...): the caller decodes those with addJSONDNAT, so a false here
// never changes a result (internal/jsonscan).
func scanDNATMap(v []byte) ([]netip.AddrPort, bool) {
	c := jsonscan.New(v)
	var targets []netip.AddrPort
	var seenKey, seenData bool
	member := func() bool {
		k, ok := c.Member()
		switch {
		case !ok:
			return false
		case string(k) == "key" && !seenKey:
			seenKey = true
			return c.Skip()
		case string(k) == "data" && !seenData:
			seenData = true
			targets, ok = concatSet(&c)
			return ok
		}
		return false
	}
	if !c.Lit('{') || !c.Name("map") || !c.Each('{', member) || !seenData || !c.Lit('}') || !c.End() {
		return nil, false
	}
	return targets, true
}

// concatSet reads {"set": [[K, {"concat": [ADDRESS, PORT]}], ...]}.
func concatSet(c *jsonscan.Cursor) ([]netip.AddrPort, bool) {
	var out []netip.AddrPort
	elem := func() bool {
		if !c.Lit('[') || !c.Skip() || !c.Lit(',') || !c.Lit('{') || !c.Name("concat") || !c.Lit('[') {
			return false
		}
		addr, ok := c.Str()
		if !ok || !c.Lit(',') {
			return false
		}
		port, ok := c.Digits()
		if !ok || !c.Lit(']') || !c.Lit('}') || !c.Lit(']') {
			return false
		}
		ap, err := nftAddrPortFromParts([]string{string(addr), string(port)})
		out = append(out, ap)
		return err == nil
	}
	if !c.Lit('{') || !c.Name("set") || !c.Each('[', elem) || !c.Lit('}') {
		return nil, false
	}
	return out, true
}
