package nftables

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"unicode"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/netdrift/netdrift/internal/model"
)

// nftJSONObject is one entry of the "nftables" array: exactly one of these is set.
type nftJSONObject struct {
	Table *nftJSONChain `json:"table"`
	Set   *nftJSONSet   `json:"set"`
	Map   *nftJSONSet   `json:"map"`
	Chain *nftJSONChain `json:"chain"`
	Rule  *nftJSONRule  `json:"rule"`
}

type nftJSONSet struct {
	Family string            `json:"family"`
	Table  string            `json:"table"`
	Name   string            `json:"name"`
	Elem   []json.RawMessage `json:"elem"`
}

type nftJSONRule struct {
	Family  string        `json:"family"`
	Table   string        `json:"table"`
	Chain   string        `json:"chain"`
	Handle  uint64        `json:"handle"`
	Comment string        `json:"comment"`
	Expr    []nftJSONStmt `json:"expr"`
}

type nftJSONChain struct {
	Family string `json:"family"`
	Table  string `json:"table"`
	Name   string `json:"name"`
}

// The decoding: the reference implementation of encoding/json/v2
// (github.com/go-json-experiment/json, already the cluster loader's) in
// its v1 mode, without the legacy mode's whole-value syntax check before
// every Unmarshal (which reads the document twice). It decodes the same types
// into the same values as encoding/json, at several times its speed; only
// its errors differ, so a document it refuses is decoded again with
// encoding/json, whose error (with line and column) is the one returned.
var nftJSONOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false))

func unmarshalNFT(data []byte, v any) error { return jsonv2.Unmarshal(data, v, nftJSONOptions) }

// decodeNFTJSON decodes an `nft -j` document's objects. empty is true for
// empty input ("no such table").
func decodeNFTJSON(data []byte) (objs []nftJSONObject, empty bool, err error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, true, nil
	}
	if hint := notJSONHint(data); hint != "" {
		return nil, false, fmt.Errorf("nft json: line 1: %s", hint)
	}
	var doc struct {
		Nftables []nftJSONObject `json:"nftables"`
	}
	if unmarshalNFT(data, &doc) == nil {
		return doc.Nftables, false, nil
	}
	doc.Nftables = nil
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, false, nftJSONError(data, err)
	}
	return doc.Nftables, false, nil
}

// parseNFTJSONTables decodes the kube-proxy tables of `nft -j list table ip
// kube-proxy` (v4) and `... ip6 kube-proxy` (v6); either may be empty (no
// such table, nil) or both the same `nft -j list ruleset` text, decoded
// once. Objects of other tables or families are ignored.
func parseNFTJSONTables(v4, v6 []byte) (t4, t6 *nftTable, err error) {
	objs4, empty4, err := decodeNFTJSON(v4)
	if err != nil {
		return nil, nil, fmt.Errorf("ip kube-proxy: %w", err)
	}
	objs6, empty6 := objs4, empty4
	if !sameBytes(v4, v6) {
		if objs6, empty6, err = decodeNFTJSON(v6); err != nil {
			return nil, nil, fmt.Errorf("ip6 kube-proxy: %w", err)
		}
	}
	if !empty4 {
		if t4, err = nftTableFromJSON(objs4, model.IPv4); err != nil {
			return nil, nil, fmt.Errorf("ip kube-proxy: %w", err)
		}
	}
	if !empty6 {
		if t6, err = nftTableFromJSON(objs6, model.IPv6); err != nil {
			return nil, nil, fmt.Errorf("ip6 kube-proxy: %w", err)
		}
	}
	return t4, t6, nil
}

// sameBytes reports whether a and b are the same memory (not just equal).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// nftTableFromJSON builds the reader's intermediate form of the family's
// kube-proxy table from a document's objects; nil when it holds no such table.
func nftTableFromJSON(objs []nftJSONObject, fam model.IPFamily) (*nftTable, error) {
	nftFam := "ip"
	if fam == model.IPv6 {
		nftFam = "ip6"
	}
	t := newNFTTable(fam)
	found := false
	for i, o := range objs {
		if err := t.addJSONObject(o, nftFam, &found); err != nil {
			return nil, fmt.Errorf("nftables[%d]: %w", i, err)
		}
	}
	if !found {
		return nil, nil
	}
	return t, nil
}

func (t *nftTable) addJSONObject(o nftJSONObject, fam string, found *bool) error {
	switch {
	case o.Table != nil:
		if o.Table.Family == fam && o.Table.Name == nftTableName {
			*found = true
		}
	case o.Chain != nil:
		if c := o.Chain; c.Family == fam && c.Table == nftTableName {
			if _, ok := t.Chains[c.Name]; !ok {
				t.Chains[c.Name] = nil
			}
		}
	case o.Map != nil:
		if o.Map.Family == fam && o.Map.Table == nftTableName && isNFTReaderMap(o.Map.Name) {
			elems, err := parseNFTJSONMapElems(o.Map.Elem)
			if err != nil {
				return fmt.Errorf("map %s: %w", o.Map.Name, err)
			}
			t.Maps[o.Map.Name] = elems
		}
	case o.Set != nil:
		if o.Set.Family == fam && o.Set.Table == nftTableName && o.Set.Name == nftSetClusterIPs {
			return t.addJSONClusterIPs(o.Set.Elem)
		}
	case o.Rule != nil:
		if o.Rule.Family == fam && o.Rule.Table == nftTableName {
			r, err := parseNFTJSONRule(o.Rule)
			if err != nil {
				return fmt.Errorf("rule %d in chain %s: %w", o.Rule.Handle, o.Rule.Chain, err)
			}
			t.Chains[o.Rule.Chain] = append(t.Chains[o.Rule.Chain], r)
			if r.MapRef != "" {
				t.MapRefs[r.MapRef]++
			}
		}
	}
	return nil
}

func isNFTReaderMap(name string) bool {
	for _, m := range nftReaderMaps {
		if m == name {
			return true
		}
	}
	return false
}

func (t *nftTable) addJSONClusterIPs(elems []json.RawMessage) error {
	t.HasClusterIPSet = true
	for i, raw := range elems {
		val, _, err := nftJSONElemValue(raw)
		if err != nil {
			return fmt.Errorf("set cluster-ips element %d: %w", i, err)
		}
		var s string
		if err := unmarshalNFT(val, &s); err != nil {
			continue // prefixes or ranges: not single cluster IPs
		}
		if a, err := netip.ParseAddr(s); err == nil {
			t.ClusterIPs[a.Unmap()] = true
		}
	}
	return nil
}

// parseNFTJSONMapElems decodes verdict map elements: [[key, verdict], ...].
func parseNFTJSONMapElems(raws []json.RawMessage) ([]nftElem, error) {
	out := make([]nftElem, 0, len(raws))
	for i, raw := range raws {
		var pair []json.RawMessage
		if err := unmarshalNFT(raw, &pair); err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("element %d: want [key, verdict]", i)
		}
		keyRaw, comment, err := nftJSONElemValue(pair[0])
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		key, err := nftJSONKeyParts(keyRaw)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		v, ok, err := parseNFTJSONVerdict(pair[1])
		if err != nil || !ok {
			return nil, fmt.Errorf("element %d: value is not a verdict: %s", i, pair[1])
		}
		out = append(out, nftElem{Key: key, Verdict: v, Comment: comment})
	}
	return out, nil
}

// nftJSONElemValue unwraps {"elem": {"val": X, "comment": C}} into X and C.
func nftJSONElemValue(raw json.RawMessage) (json.RawMessage, string, error) {
	var wrapped struct {
		Elem *struct {
			Val     json.RawMessage `json:"val"`
			Comment string          `json:"comment"`
		} `json:"elem"`
	}
	if len(raw) > 0 && raw[0] == '{' {
		if err := unmarshalNFT(raw, &wrapped); err != nil {
			return nil, "", err
		}
		if wrapped.Elem != nil {
			return wrapped.Elem.Val, wrapped.Elem.Comment, nil
		}
	}
	return raw, "", nil
}

// nftJSONKeyParts turns a key ({"concat": [...]}, a string or a number) into
// its parts as strings.
func nftJSONKeyParts(raw json.RawMessage) ([]string, error) {
	var c struct {
		Concat []json.RawMessage `json:"concat"`
	}
	if len(raw) > 0 && raw[0] == '{' {
		if err := unmarshalNFT(raw, &c); err != nil || c.Concat == nil {
			return nil, fmt.Errorf("unsupported key %s", raw)
		}
	} else {
		c.Concat = []json.RawMessage{raw}
	}
	parts := make([]string, len(c.Concat))
	for i, p := range c.Concat {
		s, err := nftJSONScalar(p)
		if err != nil {
			return nil, err
		}
		parts[i] = s
	}
	return parts, nil
}

// nftJSONScalar renders a JSON string or number as nft prints it. Plain
// strings and numbers (all nft -j prints in keys) are read without a decoder.
func nftJSONScalar(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && bytes.IndexByte(raw[1:n-1], '\\') < 0 && bytes.IndexByte(raw[1:n-1], '"') < 0 {
		return string(raw[1 : n-1]), nil
	}
	if len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		if _, err := strconv.ParseFloat(string(raw), 64); err == nil {
			return string(raw), nil
		}
	}
	var s string
	if err := unmarshalNFT(raw, &s); err == nil {
		return s, nil
	}
	return "", fmt.Errorf("unsupported value %s", raw)
}

// nftJSONVerdict is a verdict object: {"goto": {"target": X}}, {"drop":
// null}, ... (one member).
type nftJSONVerdict struct {
	Goto     *nftJSONTarget  `json:"goto"`
	Jump     *nftJSONTarget  `json:"jump"`
	Drop     json.RawMessage `json:"drop"`
	Accept   json.RawMessage `json:"accept"`
	Return   json.RawMessage `json:"return"`
	Continue json.RawMessage `json:"continue"`
	Reject   json.RawMessage `json:"reject"`
}

// nftVerdictOptions decode a verdict object strictly, as a map of one
// member would: names match exactly and a member of another name is an
// error (not a verdict).
var nftVerdictOptions = jsonv2.JoinOptions(nftJSONOptions, jsonv2.RejectUnknownMembers(true), jsonv2.MatchCaseInsensitiveNames(false))

// parseNFTJSONVerdict decodes a verdict object; ok is false when raw is not
// one (not an object, or not of exactly one member naming a verdict).
func parseNFTJSONVerdict(raw json.RawMessage) (nftVerdict, bool, error) {
	var j nftJSONVerdict
	if len(raw) == 0 || raw[0] != '{' || jsonv2.Unmarshal(raw, &j, nftVerdictOptions) != nil {
		return nftVerdict{}, false, nil
	}
	v, n, err := j.verdict()
	if err != nil || n != 1 {
		return nftVerdict{}, false, err
	}
	return v, true, nil
}

// verdict is the verdict j names (the first set, in the order goto, jump,
// drop, reject, accept, return, continue) and how many it names; a goto or
// jump without target is an error.
func (j *nftJSONVerdict) verdict() (nftVerdict, int, error) {
	var v nftVerdict
	n := 0
	for _, t := range []struct {
		target *nftJSONTarget
		kind   string
	}{{j.Goto, nftVerdictGoto}, {j.Jump, nftVerdictJump}} {
		if t.target != nil {
			if n == 0 {
				v = nftVerdict{Kind: t.kind, Target: t.target.Target}
			}
			n++
		}
	}
	for _, c := range []struct {
		arg  json.RawMessage
		kind string
	}{{j.Drop, nftVerdictDrop}, {j.Reject, nftVerdictReject}, {j.Accept, nftVerdictAccept},
		{j.Return, nftVerdictReturn}, {j.Continue, nftVerdictContinue}} {
		if c.arg != nil {
			if n == 0 {
				v = nftVerdict{Kind: c.kind}
			}
			n++
		}
	}
	if (v.Kind == nftVerdictGoto || v.Kind == nftVerdictJump) && v.Target == "" {
		return nftVerdict{}, n, fmt.Errorf("%s without target", v.Kind)
	}
	return v, n, nil
}

// nftJSONStmt is one statement of a rule; at most one field is set.
// Verdicts without argument ("drop": null) decode as the literal "null".
type nftJSONStmt struct {
	Match *nftJSONMatch `json:"match"`
	DNAT  *nftJSONDNAT  `json:"dnat"`
	VMap  *nftJSONVMap  `json:"vmap"`
	nftJSONVerdict
}

type nftJSONMatch struct {
	Op    string          `json:"op"`
	Left  json.RawMessage `json:"left"`
	Right json.RawMessage `json:"right"`
}

// nftJSONDNAT: Addr is a string or {"map": {"data": {"set": [[key,
// addr . port], ...]}}}, decoded by addJSONDNAT (json_dnat.go reads the
// usual map form as it is decoded).
type nftJSONDNAT struct {
	Addr nftJSONDNATAddr `json:"addr"`
	Port *uint16         `json:"port"`
}

// nftJSONVMap: Data is "@mapname" or {"set": [[key, verdict], ...]}.
type nftJSONVMap struct {
	Data json.RawMessage `json:"data"`
}

// nftJSONSetData is {"set": [[key, value], ...]}: an anonymous map's elements.
type nftJSONSetData struct {
	Set [][]json.RawMessage `json:"set"`
}

type nftJSONTarget struct {
	Target string `json:"target"`
}

// parseNFTJSONRule reduces a rule's statements (see nftRule).
func parseNFTJSONRule(jr *nftJSONRule) (nftRule, error) {
	r := nftRule{Handle: jr.Handle, Comment: jr.Comment}
	for i := range jr.Expr {
		if err := r.addJSONStatement(&jr.Expr[i]); err != nil {
			return r, fmt.Errorf("statement %d: %w", i, err)
		}
	}
	r.normalize()
	return r, nil
}

// addJSONStatement folds one statement in. Statements other than matches,
// dnat, vmaps and verdicts (mangle, set update, counter, masquerade, log...)
// do not decide where the connection goes.
func (r *nftRule) addJSONStatement(st *nftJSONStmt) error {
	switch {
	case st.Match != nil:
		r.addJSONMatch(st.Match)
	case st.DNAT != nil:
		return r.addJSONDNAT(st.DNAT)
	case st.VMap != nil:
		return r.addJSONVMap(st.VMap)
	default:
		v, n, err := st.verdict()
		if err != nil {
			return err
		}
		if n > 0 {
			r.Verdict = v
		}
	}
	return nil
}

var nftL4Proto = []byte("l4proto")

// nftIsL4ProtoLeft reports whether a match's left side is {"meta": {"key": "l4proto"}}.
func nftIsL4ProtoLeft(left json.RawMessage) bool {
	if !bytes.Contains(left, nftL4Proto) {
		return false
	}
	var l struct {
		Meta *struct {
			Key string `json:"key"`
		} `json:"meta"`
	}
	return unmarshalNFT(left, &l) == nil && l.Meta != nil && l.Meta.Key == "l4proto"
}

func (r *nftRule) addJSONMatch(m *nftJSONMatch) {
	if m.Op == "==" && nftIsL4ProtoLeft(m.Left) {
		var p string
		if unmarshalNFT(m.Right, &p) == nil {
			r.Proto = p
			return
		}
	}
	r.Conditional = true
}

func (r *nftRule) addJSONDNAT(d *nftJSONDNAT) error {
	if d.Addr.scanned {
		r.DNAT = append(r.DNAT, d.Addr.targets...)
		return nil
	}
	return r.addJSONDNATValue(d.Addr.raw, d.Port)
}

// addJSONDNATValue decodes a dnat address the scan did not read.
func (r *nftRule) addJSONDNATValue(addr json.RawMessage, dport *uint16) error {
	if len(addr) > 0 && addr[0] == '"' {
		var a string
		if err := unmarshalNFT(addr, &a); err != nil {
			return err
		}
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return err
		}
		var port uint16
		if dport != nil {
			port = *dport
		}
		r.DNAT = append(r.DNAT, netip.AddrPortFrom(ip.Unmap(), port))
		return nil
	}
	var m struct {
		Map *struct {
			Data nftJSONSetData `json:"data"`
		} `json:"map"`
	}
	if len(addr) == 0 || addr[0] != '{' || unmarshalNFT(addr, &m) != nil || m.Map == nil || m.Map.Data.Set == nil {
		return fmt.Errorf("unsupported dnat address %s", addr)
	}
	for _, pair := range m.Map.Data.Set {
		if len(pair) != 2 {
			return errors.New("dnat map element is not a pair")
		}
		parts, err := nftJSONKeyParts(pair[1])
		if err != nil {
			return err
		}
		ap, err := nftAddrPortFromParts(parts)
		if err != nil {
			return err
		}
		r.DNAT = append(r.DNAT, ap)
	}
	return nil
}

func nftAddrPortFromParts(parts []string) (netip.AddrPort, error) {
	if len(parts) != 2 {
		return netip.AddrPort{}, fmt.Errorf("want address . port, got %v", parts)
	}
	a, err := netip.ParseAddr(parts[0])
	if err != nil {
		return netip.AddrPort{}, err
	}
	p, err := strconv.ParseUint(parts[1], 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port %q", parts[1])
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil
}

func (r *nftRule) addJSONVMap(vm *nftJSONVMap) error {
	if len(vm.Data) > 0 && vm.Data[0] == '"' {
		var d string
		if err := unmarshalNFT(vm.Data, &d); err != nil {
			return err
		}
		if len(d) > 1 && d[0] == '@' {
			r.MapRef = d[1:]
		}
		return nil
	}
	var sd nftJSONSetData
	if len(vm.Data) == 0 || vm.Data[0] != '{' || unmarshalNFT(vm.Data, &sd) != nil || sd.Set == nil {
		return fmt.Errorf("unsupported vmap data %s", vm.Data)
	}
	for _, pair := range sd.Set {
		if len(pair) != 2 {
			return errors.New("vmap element is not a pair")
		}
		v, ok, _ := parseNFTJSONVerdict(pair[1])
		if !ok {
			return fmt.Errorf("vmap value is not a verdict: %s", pair[1])
		}
		r.VMap = append(r.VMap, v)
	}
	return nil
}

// nftJSONError names the line and column of a JSON syntax error.
func nftJSONError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	off := int64(-1)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 {
		return fmt.Errorf("nft json: %w", err)
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Errorf("nft json: line %d, column %d (byte %d): %w", line, col, off, err)
}

// notJSONHint names the right capture or flag when data is not JSON but
// another capture people paste ("" when it starts like JSON).
func notJSONHint(data []byte) string {
	data = bytes.TrimLeftFunc(data, unicode.IsSpace) // as bytes.TrimSpace trims
	s := string(data[:min(len(data), 64)])           // the prefixes below are short: no copy of the whole capture
	if s == "" || s[0] == '{' || s[0] == '[' {
		return ""
	}
	switch {
	case hasPrefixAny(s, "table ", "flush ruleset", "chain ", "#!/usr/sbin/nft"):
		return "this is `nft list` text, not JSON: capture `nft -j list ruleset` (or `nft -j list table ip kube-proxy`)"
	case hasPrefixAny(s, "*", ":", "-P ", "-N ", "-A KUBE", "# Generated by iptables"):
		return "this is iptables output, not nft JSON: pass it as --iptables-save"
	case hasPrefixAny(s, "IP Virtual Server", "-A -t ", "-A -u ", "-A -f "):
		return "this is ipvsadm output, not nft JSON: pass it as --ipvsadm-save"
	}
	return "not JSON: capture `nft -j list ruleset`"
}

func hasPrefixAny(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if len(s) >= len(p) && s[:len(p)] == p {
			return true
		}
	}
	return false
}

// holdsIPTablesNFT reports whether nft JSON holds the tables iptables-nft
// writes for kube-proxy's iptables mode (chain KUBE-SERVICES in table nat).
func holdsIPTablesNFT(data []byte) bool {
	if !bytes.Contains(data, []byte("KUBE-SERVICES")) {
		return false
	}
	objs, _, err := decodeNFTJSON(data)
	if err != nil {
		return false
	}
	for _, o := range objs {
		if c := o.Chain; c != nil && c.Name == "KUBE-SERVICES" && (c.Table == "nat" || c.Table == "filter") {
			return true
		}
	}
	return false
}
