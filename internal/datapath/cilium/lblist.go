package cilium

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// LBListCommand is what a responder runs on a Cilium node for ParseLBList.
const LBListCommand = "kubectl -n kube-system exec ds/cilium -- cilium-dbg bpf lb list -o json"

// ParseLBList reads what `cilium-dbg bpf lb list -o json` prints (an object
// of "frontend (slot)" keys, each with its entries), or the plain table the
// same command prints without -o json, into the observed model.
//
// The listing does not carry a frontend's count and qcount, so it cannot
// tell a selectable slot from a parked one (a terminating backend kept for
// draining): every slot is read as a backend, and a warning says so. The
// live reader reads the maps and has no such gap.
func ParseLBList(data []byte, hints model.Hints) (model.Observed, error) {
	entries, err := lbListEntries(data)
	if err != nil {
		return model.Observed{}, err
	}
	svcs, backends, err := lbListTables(entries)
	if err != nil {
		return model.Observed{}, err
	}
	obs := observe(svcs, backends, hints)
	obs.Warnings = append(obs.Warnings, "the lb list does not say which slots are parked (terminating or quarantined "+
		"backends kept for draining): every slot is read as a backend; read the node's maps live for the difference")
	return obs, nil
}

// lbListEntries returns key -> entries from either form.
func lbListEntries(data []byte) (map[string][]string, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("the lb list is empty: run `%s`", LBListCommand)
	}
	if trimmed[0] == '{' {
		var m map[string][]string
		if err := json.Unmarshal(trimmed, &m); err != nil {
			return nil, fmt.Errorf("not the JSON of `cilium-dbg bpf lb list -o json` (%v): run `%s`", err, LBListCommand)
		}
		return m, nil
	}
	return lbListTable(trimmed)
}

// lbListTable reads the plain table: a header naming SERVICE ADDRESS, then
// "frontend (slot)   entry" lines (continuation lines have no key).
func lbListTable(data []byte) (map[string][]string, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	m := map[string][]string{}
	header, last := false, ""
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" {
			continue
		}
		if !header {
			if !strings.HasPrefix(line, "SERVICE ADDRESS") || !strings.Contains(line, "BACKEND ADDRESS") {
				return nil, fmt.Errorf("not the output of `cilium-dbg bpf lb list` (first line %q): run `%s`", clip(line), LBListCommand)
			}
			header = true
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last == "" {
				return nil, fmt.Errorf("lb list: entry %q has no frontend", clip(line))
			}
			m[last] = append(m[last], strings.TrimSpace(line))
			continue
		}
		i := strings.Index(line, ")")
		if i < 0 {
			return nil, fmt.Errorf("lb list: line %q has no \"frontend (slot)\" key", clip(line))
		}
		last = line[:i+1]
		m[last] = append(m[last], strings.TrimSpace(line[i+1:]))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !header {
		return nil, fmt.Errorf("not the output of `cilium-dbg bpf lb list`: run `%s`", LBListCommand)
	}
	return m, nil
}

// lbListTables rebuilds services entries and a backends table from the
// listing; backend ids are assigned per distinct backend address.
func lbListTables(m map[string][]string) ([]svcEntry, map[uint32]backendEntry, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ids := map[backendEntry]uint32{}
	backends := map[uint32]backendEntry{}
	var svcs []svcEntry
	counts := map[feKey]uint16{}
	for _, k := range keys {
		e, err := parseLBKey(k)
		if err != nil {
			return nil, nil, err
		}
		if len(m[k]) != 1 {
			return nil, nil, fmt.Errorf("lb list: %q has %d entries, want 1", k, len(m[k]))
		}
		val := m[k][0]
		if e.Slot == 0 {
			if e.Flags, e.Flags2, err = parseLBFlags(val); err != nil {
				return nil, nil, fmt.Errorf("lb list: %q: %w", k, err)
			}
			svcs = append(svcs, e)
			continue
		}
		b, err := parseLBBackend(val)
		if err != nil {
			return nil, nil, fmt.Errorf("lb list: %q: %w", k, err)
		}
		id, ok := ids[b]
		if !ok {
			id = uint32(len(ids) + 1)
			ids[b], backends[id] = id, b
		}
		e.BackendID = id
		svcs = append(svcs, e)
		fk := feKey{e.Addr, e.Port, e.Proto, e.Scope}
		counts[fk] = max(counts[fk], e.Slot)
	}
	for i := range svcs {
		if svcs[i].Slot == 0 {
			svcs[i].Count = counts[feKey{svcs[i].Addr, svcs[i].Port, svcs[i].Proto, svcs[i].Scope}]
		}
	}
	return svcs, backends, nil
}

// parseLBKey reads "10.96.0.10:80/TCP (0)", "[fd00::1]:80/UDP/i (2)".
func parseLBKey(k string) (svcEntry, error) {
	var e svcEntry
	addrPart, slotPart, ok := strings.Cut(k, " (")
	if !ok || !strings.HasSuffix(slotPart, ")") {
		return e, fmt.Errorf("lb list: key %q is not \"address:port/protocol (slot)\"", k)
	}
	slot, err := strconv.ParseUint(strings.TrimSuffix(slotPart, ")"), 10, 16)
	if err != nil {
		return e, fmt.Errorf("lb list: key %q: slot: %w", k, err)
	}
	e.Slot = uint16(slot)
	if rest, ok := strings.CutSuffix(addrPart, "/i"); ok {
		addrPart, e.Scope = rest, scopeInternal
	}
	ap, proto, err := parseAddrProto(addrPart)
	if err != nil {
		return e, fmt.Errorf("lb list: key %q: %w", k, err)
	}
	e.Addr, e.Port, e.Proto = ap.Addr(), ap.Port(), proto
	return e, nil
}

// parseLBBackend reads "10.244.1.2:8080/TCP (7) (1)".
func parseLBBackend(v string) (backendEntry, error) {
	if strings.HasPrefix(v, "backend ") && strings.HasSuffix(v, " not found") {
		return backendEntry{}, errors.New("the slot names a backend missing from the backends map (" + v + ")")
	}
	f := strings.Fields(v)
	if len(f) == 0 {
		return backendEntry{}, errors.New("empty backend entry")
	}
	ap, proto, err := parseAddrProto(f[0])
	if err != nil {
		return backendEntry{}, err
	}
	return backendEntry{Addr: ap.Addr(), Port: ap.Port(), Proto: proto}, nil
}

func parseAddrProto(s string) (netip.AddrPort, uint8, error) {
	i := strings.LastIndex(s, "/")
	if i < 0 {
		return netip.AddrPort{}, 0, fmt.Errorf("%q has no /protocol", s)
	}
	ap, err := netip.ParseAddrPort(s[:i])
	if err != nil {
		return netip.AddrPort{}, 0, err
	}
	proto, ok := map[string]uint8{"ANY": 0, "NONE": 0, "TCP": 6, "UDP": 17, "SCTP": 132}[s[i+1:]]
	if !ok {
		return netip.AddrPort{}, 0, fmt.Errorf("%q: unknown protocol %q", s, s[i+1:])
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), proto, nil
}

// parseLBFlags reads a master entry's "[ClusterIP, Local, two-scopes]".
func parseLBFlags(v string) (flags, flags2 uint8, err error) {
	open, end := strings.LastIndex(v, " ["), strings.LastIndex(v, "]")
	if open < 0 || end < open {
		return 0, 0, fmt.Errorf("master entry %q has no [flags]", v)
	}
	for i, word := range strings.Split(v[open+2:end], ", ") {
		f, f2, ok := lbFlagWord(word, i == 0)
		if !ok {
			return 0, 0, fmt.Errorf("unknown service flag %q in %q", word, v)
		}
		flags, flags2 = flags|f, flags2|f2
	}
	return flags, flags2, nil
}

// lbFlagWord maps one word of Cilium's ServiceFlags string; the first word
// is the service type.
func lbFlagWord(w string, first bool) (uint8, uint8, bool) {
	if first {
		switch w {
		case "ClusterIP":
			return 0, 0, true
		case "NodePort":
			return flagNodePort, 0, true
		case "ExternalIPs":
			return flagExternalIP, 0, true
		case "LoadBalancer":
			return flagLoadBalancer, 0, true
		case "HostPort":
			return flagHostPort, 0, true
		case "LocalRedirect":
			return 0, flag2LocalRedirect, true
		}
		return 0, 0, false
	}
	switch w {
	case "Local":
		return flagExtLocalScope, 0, true
	case "InternalLocal":
		return 0, flag2IntLocalScope, true
	case "two-scopes":
		return 0, flag2TwoScopes, true
	case "sessionAffinity":
		return flagAffinity, 0, true
	case "check source-range":
		return flagSourceRange, 0, true
	case "l7-load-balancer":
		return 0, flag2L7LoadBalancer, true
	case "non-routable", "deny", "46x64", "loopback", "delegate-if-local", "quarantined", "dsr":
		return 0, 0, true
	}
	return 0, 0, false
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}
