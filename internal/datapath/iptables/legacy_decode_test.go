package iptables

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// legacyVector is one table the kernel returned (testdata/legacy-entries.hex,
// written by TestWriteLegacyVectors: GET_INFO and GET_ENTRIES bytes dumped
// from the kernel here) with the rules iptables-legacy-save printed for it.
type legacyVector struct {
	name string
	v6   bool
	info []byte
	blob []byte
	save []string
}

func legacyVectors(t testing.TB) []legacyVector {
	t.Helper()
	f, err := os.Open("testdata/legacy-entries.hex")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []legacyVector
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := sc.Text()
		key, val, _ := strings.Cut(line, " ")
		switch key {
		case "vector":
			out = append(out, legacyVector{name: val, v6: strings.Contains(val, " ipv6 ")})
		case "info", "blob":
			b, err := hex.DecodeString(val)
			if err != nil {
				t.Fatal(err)
			}
			if key == "info" {
				out[len(out)-1].info = b
			} else {
				out[len(out)-1].blob = b
			}
		case "save":
			out[len(out)-1].save = append(out[len(out)-1].save, val)
		}
	}
	if len(out) < 5 {
		t.Fatalf("only %d vectors", len(out))
	}
	return out
}

func renderedLines(chains []legacyChain) ([]string, error) {
	var out []string
	for _, c := range chains {
		for _, r := range c.rules {
			if r.err != nil {
				return nil, r.err
			}
			l := "-A " + c.name
			if r.args != "" {
				l += " " + r.args
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// TestDecodeLegacyCaptured decodes tables the kernel returned into exactly
// the rules iptables-legacy-save printed, in its order.
func TestDecodeLegacyCaptured(t *testing.T) {
	for _, v := range legacyVectors(t) {
		info, err := parseInfo(v.info)
		if err != nil {
			t.Fatal(err)
		}
		chains, err := decodeLegacyTable(v.v6, info, v.blob)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		got, err := renderedLines(chains)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if len(got) != len(v.save) {
			t.Errorf("%s: %d rules, iptables-legacy-save printed %d", v.name, len(got), len(v.save))
		}
		for i := range min(len(got), len(v.save)) {
			if got[i] != v.save[i] {
				t.Errorf("%s rule %d:\ndecoded %s\nsaved   %s", v.name, i, got[i], v.save[i])
			}
		}
		// The rendered text parses as a dump's rule would.
		text := legacyTableText("t", chains)
		if _, err := parseDump(text); err != nil {
			t.Errorf("%s: rendered table does not parse: %v", v.name, err)
		}
	}
}

// vectorWith returns a copy of the first vector of a family and its info.
func vectorWith(t *testing.T, v6 bool) (tableInfo, []byte) {
	t.Helper()
	for _, v := range legacyVectors(t) {
		if v.v6 == v6 {
			info, _ := parseInfo(v.info)
			return info, append([]byte(nil), v.blob...)
		}
	}
	t.Fatal("no vector")
	return tableInfo{}, nil
}

// TestDecodeLegacyRefusesMalformed: a blob that is not what libiptc writes
// is an error, never a guess.
func TestDecodeLegacyRefusesMalformed(t *testing.T) {
	info, blob := vectorWith(t, false)
	lay := layoutV4
	// The offset of the first user chain's first rule, and of its head.
	chains, err := decodeLegacyTable(false, info, blob)
	if err != nil {
		t.Fatal(err)
	}
	_ = chains
	for _, tc := range []struct {
		name string
		mut  func(b []byte, info *tableInfo)
	}{
		{"truncated", func(b []byte, info *tableInfo) { info.size -= 8 }},
		{"entry count", func(b []byte, info *tableInfo) { info.numEntries++ }},
		{"next offset past the end", func(b []byte, info *tableInfo) { ne.PutUint16(b[lay.nextOff:], 0xfff8) }},
		{"target offset inside the header", func(b []byte, info *tableInfo) { ne.PutUint16(b[lay.targetOff:], 8) }},
		{"hook entry off an entry", func(b []byte, info *tableInfo) { info.hookEntry[0] += 4 }},
		{"underflow moved", func(b []byte, info *tableInfo) { info.underflow[4] = info.underflow[3] }},
		{"no final ERROR", func(b []byte, info *tableInfo) {
			last := lastEntry(b, lay)
			copy(b[last+int(ne.Uint16(b[last+lay.targetOff:]))+2:], "XXXXX")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), blob...)
			in := info
			tc.mut(b, &in)
			if uint32(len(b)) > in.size {
				b = b[:in.size]
			}
			if _, err := decodeLegacyTable(false, in, b); err == nil {
				t.Fatal("decoded a malformed table")
			} else {
				t.Log(err)
			}
		})
	}
}

func lastEntry(b []byte, lay entryLayout) int {
	off, last := 0, 0
	for off < len(b) {
		last = off
		off += int(ne.Uint16(b[off+lay.nextOff:]))
	}
	return last
}

// TestDecodeLegacyJumpIntoChain: a jump whose verdict is not the start of a
// user chain (libiptc would name the chain around it) is not rendered.
func TestDecodeLegacyJumpIntoChain(t *testing.T) {
	info, blob := vectorWith(t, false)
	lay := layoutV4
	changed := false
	for off := 0; off < len(blob) && !changed; off += int(ne.Uint16(blob[off+lay.nextOff:])) {
		tg := off + int(ne.Uint16(blob[off+lay.targetOff:]))
		if xtName(blob[tg:]) == "" && ne.Uint16(blob[tg:]) == xtStdTargetSize {
			if v := int32(ne.Uint32(blob[tg+xtHeaderSize:])); v > 0 && int(v) != off+int(ne.Uint16(blob[off+lay.nextOff:])) {
				ne.PutUint32(blob[tg+xtHeaderSize:], uint32(v+8))
				changed = true
			}
		}
	}
	if !changed {
		t.Fatal("no jump in the vector")
	}
	chains, err := decodeLegacyTable(false, info, blob)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := renderedLines(chains); err == nil || !strings.Contains(err.Error(), "not the start of a user chain") {
		t.Fatalf("want a jump error, got %v", err)
	}
}

func TestSaveIfaceAndAddr(t *testing.T) {
	name := func(s string) []byte { b := make([]byte, 16); copy(b, s); return b }
	mask := func(n int) []byte {
		b := make([]byte, 16)
		for i := range n {
			b[i] = 0xff
		}
		return b
	}
	for _, tc := range []struct {
		name, want string
		mask       []byte
		inv        bool
	}{
		{"eth0", " -i eth0", mask(5), false},
		{"eth+", " -i eth+", mask(3), false},
		{"eth0", " ! -i eth0", mask(5), true},
		{"+", "", mask(0), false},
		{"abcdefghijklmno", " -i abcdefghijklmno", mask(16), false},
	} {
		var s strings.Builder
		saveIface(&s, 'i', name(tc.name), tc.mask, tc.inv)
		if s.String() != tc.want {
			t.Errorf("%q/%x: %q, want %q", tc.name, tc.mask, s.String(), tc.want)
		}
	}
	for _, tc := range []struct {
		v6         bool
		addr, mask []byte
		inv        bool
		want       string
	}{
		{false, []byte{10, 0, 0, 0}, []byte{255, 0, 0, 0}, false, " -s 10.0.0.0/8"},
		{false, []byte{0, 0, 0, 0}, []byte{0, 0, 0, 0}, false, ""},
		{false, []byte{0, 0, 0, 0}, []byte{0, 0, 0, 0}, true, " ! -s 0.0.0.0/0"},
		{false, []byte{10, 0, 1, 0}, []byte{255, 0, 255, 0}, false, " -s 10.0.1.0/255.0.255.0"},
		{true, append(make([]byte, 12), 10, 0, 0, 1), mask(16), false, " -s ::10.0.0.1/128"},
		{true, append(append(make([]byte, 10), 0xff, 0xff), 10, 0, 0, 1), mask(16), false, " -s ::ffff:10.0.0.1/128"},
		{true, append([]byte{0xfd}, make([]byte, 15)...), mask(8), false, " -s fd00::/64"},
	} {
		var s strings.Builder
		saveAddr(&s, tc.v6, 's', tc.addr, tc.mask, tc.inv)
		if s.String() != tc.want {
			t.Errorf("%x/%x: %q, want %q", tc.addr, tc.mask, s.String(), tc.want)
		}
	}
}

func TestParseProtocols(t *testing.T) {
	m := parseProtocols("# comment\nip\t0\tIP\t\t# internet protocol\ngre 47 GRE\nalias 47 X\nbad x\n")
	if m[47] != "gre" || m[0] != "ip" || len(m) != 2 {
		t.Fatalf("%v", m)
	}
}

// FuzzDecodeLegacyTable: no input panics the entry decoder; what it
// renders parses with the dump's rule parser or is refused, never a panic.
func FuzzDecodeLegacyTable(f *testing.F) {
	for _, v := range legacyVectors(f) {
		if len(v.blob) < 8000 {
			f.Add(v.v6, v.info, v.blob)
		}
	}
	f.Fuzz(func(t *testing.T, v6 bool, infoB, blob []byte) {
		if len(infoB) < getinfoSize {
			return
		}
		info, _ := parseInfo(infoB)
		info.size = uint32(len(blob))
		chains, err := decodeLegacyTable(v6, info, blob)
		if err != nil {
			return
		}
		for _, c := range chains {
			tb := &ipTable{name: "t", chains: map[string]*ipChain{}}
			ch := &ipChain{name: c.name}
			for _, r := range c.rules {
				if r.err == nil {
					_ = tb.addNLRule(ch, nlRule{chain: c.name, args: r.args}, false)
				}
			}
		}
	})
}
