package nftables

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/netdrift/netdrift/internal/model"
)

// nftJSONObject is one entry of the "nftables" array: exactly one of these is set.
type nftJSONObject struct {
	Table json.RawMessage `json:"table"`
	Set   *nftJSONSet     `json:"set"`
	Map   *nftJSONSet     `json:"map"`
	Chain json.RawMessage `json:"chain"`
	Rule  *nftJSONRule    `json:"rule"`
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

// parseNFTJSONTable decodes `nft -j list table <family> kube-proxy` output
// into the reader's intermediate form. Objects of other tables or families
// are ignored. Empty input means "no such table" and returns nil.
func parseNFTJSONTable(data []byte, fam model.IPFamily) (*nftTable, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var doc struct {
		Nftables []nftJSONObject `json:"nftables"`
	}
	if hint := notJSONHint(data); hint != "" {
		return nil, fmt.Errorf("nft json: line 1: %s", hint)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nftJSONError(data, err)
	}
	nftFam := "ip"
	if fam == model.IPv6 {
		nftFam = "ip6"
	}
	t := newNFTTable(fam)
	found := false
	for i, o := range doc.Nftables {
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
		var tb nftJSONChain
		if err := json.Unmarshal(o.Table, &tb); err != nil {
			return fmt.Errorf("table: %w", err)
		}
		if tb.Family == fam && tb.Name == nftTableName {
			*found = true
		}
	case o.Chain != nil:
		var c nftJSONChain
		if err := json.Unmarshal(o.Chain, &c); err != nil {
			return fmt.Errorf("chain: %w", err)
		}
		if c.Family == fam && c.Table == nftTableName {
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
		if err := json.Unmarshal(val, &s); err != nil {
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
		if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
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
		if err := json.Unmarshal(raw, &wrapped); err != nil {
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
		if err := json.Unmarshal(raw, &c); err != nil || c.Concat == nil {
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
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	return "", fmt.Errorf("unsupported value %s", raw)
}

// parseNFTJSONVerdict decodes {"goto": {"target": X}}, {"drop": null}, ...
// ok is false when raw is not a verdict.
func parseNFTJSONVerdict(raw json.RawMessage) (nftVerdict, bool, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 1 {
		return nftVerdict{}, false, nil
	}
	for k, v := range m {
		switch k {
		case nftVerdictGoto, nftVerdictJump:
			var t struct {
				Target string `json:"target"`
			}
			if err := json.Unmarshal(v, &t); err != nil || t.Target == "" {
				return nftVerdict{}, false, fmt.Errorf("%s without target", k)
			}
			return nftVerdict{Kind: k, Target: t.Target}, true, nil
		case nftVerdictDrop, nftVerdictAccept, nftVerdictReturn, nftVerdictContinue, nftVerdictReject:
			return nftVerdict{Kind: k}, true, nil
		}
	}
	return nftVerdict{}, false, nil
}

// nftJSONStmt is one statement of a rule; at most one field is set.
// Verdicts without argument ("drop": null) decode as the literal "null".
type nftJSONStmt struct {
	Match    *nftJSONMatch   `json:"match"`
	DNAT     *nftJSONDNAT    `json:"dnat"`
	VMap     *nftJSONVMap    `json:"vmap"`
	Goto     *nftJSONTarget  `json:"goto"`
	Jump     *nftJSONTarget  `json:"jump"`
	Drop     json.RawMessage `json:"drop"`
	Accept   json.RawMessage `json:"accept"`
	Return   json.RawMessage `json:"return"`
	Continue json.RawMessage `json:"continue"`
	Reject   json.RawMessage `json:"reject"`
}

type nftJSONMatch struct {
	Op    string          `json:"op"`
	Left  json.RawMessage `json:"left"`
	Right json.RawMessage `json:"right"`
}

// nftJSONDNAT: Addr is a string or {"map": ...}, decoded generically in the
// one pass over the document (sub-documents are never scanned twice).
type nftJSONDNAT struct {
	Addr any     `json:"addr"`
	Port *uint16 `json:"port"`
}

// nftJSONVMap: Data is "@mapname" or {"set": [[key, verdict], ...]}.
type nftJSONVMap struct {
	Data any `json:"data"`
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
	case st.Goto != nil || st.Jump != nil:
		kind, t := nftVerdictGoto, st.Goto
		if t == nil {
			kind, t = nftVerdictJump, st.Jump
		}
		if t.Target == "" {
			return fmt.Errorf("%s without target", kind)
		}
		r.Verdict = nftVerdict{Kind: kind, Target: t.Target}
	case st.Drop != nil:
		r.Verdict = nftVerdict{Kind: nftVerdictDrop}
	case st.Reject != nil:
		r.Verdict = nftVerdict{Kind: nftVerdictReject}
	case st.Accept != nil:
		r.Verdict = nftVerdict{Kind: nftVerdictAccept}
	case st.Return != nil:
		r.Verdict = nftVerdict{Kind: nftVerdictReturn}
	case st.Continue != nil:
		r.Verdict = nftVerdict{Kind: nftVerdictContinue}
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
	return json.Unmarshal(left, &l) == nil && l.Meta != nil && l.Meta.Key == "l4proto"
}

func (r *nftRule) addJSONMatch(m *nftJSONMatch) {
	if m.Op == "==" && nftIsL4ProtoLeft(m.Left) {
		var p string
		if json.Unmarshal(m.Right, &p) == nil {
			r.Proto = p
			return
		}
	}
	r.Conditional = true
}

func (r *nftRule) addJSONDNAT(d *nftJSONDNAT) error {
	switch a := d.Addr.(type) {
	case string:
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return err
		}
		var port uint16
		if d.Port != nil {
			port = *d.Port
		}
		r.DNAT = append(r.DNAT, netip.AddrPortFrom(ip.Unmap(), port))
		return nil
	case map[string]any:
		m, _ := a["map"].(map[string]any)
		data, _ := m["data"].(map[string]any)
		set, ok := data["set"].([]any)
		if !ok {
			break
		}
		for _, kv := range set {
			pair, ok := kv.([]any)
			if !ok || len(pair) != 2 {
				return errors.New("dnat map element is not a pair")
			}
			parts, err := nftAnyParts(pair[1])
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
	return fmt.Errorf("unsupported dnat address %v", d.Addr)
}

// nftAnyParts turns a generically decoded key ({"concat": [...]} or a
// scalar) into its parts as strings.
func nftAnyParts(v any) ([]string, error) {
	if m, ok := v.(map[string]any); ok {
		c, ok := m["concat"].([]any)
		if !ok {
			return nil, fmt.Errorf("unsupported key %v", v)
		}
		parts := make([]string, len(c))
		for i, p := range c {
			s, err := nftAnyScalar(p)
			if err != nil {
				return nil, err
			}
			parts[i] = s
		}
		return parts, nil
	}
	s, err := nftAnyScalar(v)
	return []string{s}, err
}

func nftAnyScalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return "", fmt.Errorf("unsupported value %v", v)
}

// nftAnyVerdict decodes {"goto": {"target": X}}, {"drop": null}, ...
func nftAnyVerdict(v any) (nftVerdict, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return nftVerdict{}, false
	}
	for k, arg := range m {
		switch k {
		case nftVerdictGoto, nftVerdictJump:
			t, _ := arg.(map[string]any)
			target, _ := t["target"].(string)
			return nftVerdict{Kind: k, Target: target}, target != ""
		case nftVerdictDrop, nftVerdictAccept, nftVerdictReturn, nftVerdictContinue, nftVerdictReject:
			return nftVerdict{Kind: k}, true
		}
	}
	return nftVerdict{}, false
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
	switch d := vm.Data.(type) {
	case string:
		if len(d) > 1 && d[0] == '@' {
			r.MapRef = d[1:]
		}
		return nil
	case map[string]any:
		set, ok := d["set"].([]any)
		if !ok {
			break
		}
		for _, kv := range set {
			pair, ok := kv.([]any)
			if !ok || len(pair) != 2 {
				return errors.New("vmap element is not a pair")
			}
			v, ok := nftAnyVerdict(pair[1])
			if !ok {
				return fmt.Errorf("vmap value is not a verdict: %v", pair[1])
			}
			r.VMap = append(r.VMap, v)
		}
		return nil
	}
	return fmt.Errorf("unsupported vmap data %v", vm.Data)
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
	s := string(bytes.TrimSpace(data))
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
	var doc struct {
		Nftables []nftJSONObject `json:"nftables"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return false
	}
	for _, o := range doc.Nftables {
		var c nftJSONChain
		if o.Chain != nil && json.Unmarshal(o.Chain, &c) == nil && c.Name == "KUBE-SERVICES" && (c.Table == "nat" || c.Table == "filter") {
			return true
		}
	}
	return false
}
