package iptables

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
)

// FuzzParseIPTables: any input either parses or fails with an error naming a
// line; it never panics, and every forward verdict has backends sorted.
func FuzzParseIPTables(f *testing.F) {
	for _, name := range []string{"restore-input.iptables", "dualstack.v4.iptables-save", "dualstack.v6.iptables-save",
		"large-cluster.iptables-save", "stale-chains.iptables-save", "restore-input.roundtrip.iptables-save"} {
		b, err := os.ReadFile(fixture.Path(f, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n:KUBE-SEP-A - [0:0]\n" +
		"-A KUBE-SERVICES -d 10.0.0.1/32 -p tcp --dport 80 -j KUBE-SVC-A\n-A KUBE-SVC-A -j KUBE-SEP-A\n" +
		"-A KUBE-SEP-A -j DNAT --to-destination 10.1.0.1:8080\n-A KUBE-SVC-A -j KUBE-SVC-A\nCOMMIT\n"))
	f.Add([]byte("*filter\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -d 10.0.0.1 -p udp --dport 53 -m comment --comment \"a/b has no endpoints\" -j REJECT\nCOMMIT\n"))
	f.Add([]byte("*nat\n-A X \"unterminated\n"))
	// The corpus's small captures: iptables -S listings, indented pastes,
	// two dumps in one file, an IPVS-mode node, and the wrong formats.
	for _, b := range corpusSeeds(f, func(name string) bool {
		return strings.Contains(name, "tables-") || strings.HasSuffix(name, ".nft.txt") || strings.Contains(name, "ipvsadm")
	}) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		obs, err := Parse(Dumps{IPv4: data, IPv6: data}, model.Hints{})
		if err != nil {
			if !strings.Contains(err.Error(), "line ") {
				t.Fatalf("error without a line number: %v", err)
			}
			return
		}
		for fe, v := range obs.Frontends {
			for i := 1; i < len(v.Backends); i++ {
				if !model.AddrPortLess(v.Backends[i-1], v.Backends[i]) {
					t.Fatalf("%s: backends not sorted and unique: %v", fe, v.Backends)
				}
			}
		}
	})
}

// FuzzDecodeRule: any rule message decodes or fails with an error; it
// never panics, and what decodes parses with the dump's rule parser.
func FuzzDecodeRule(f *testing.F) {
	b, err := os.ReadFile("testdata/netlink-rules.hex")
	if err != nil {
		f.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(l, "hex "); ok {
			if v, err := hex.DecodeString(h); err == nil {
				f.Add(v, false)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, v6 bool) {
		r, err := decodeRule(v6, data)
		if err != nil {
			return
		}
		toks, err := tokenize("-A X "+r.args, nil)
		if err != nil {
			return // a chain name or comment the renderer could not quote is not a panic
		}
		var ir ipRule
		_ = parseRule(&ir, "X", toks[2:], r.args)
	})
}

// corpusSeeds returns the small files (under 64 KiB) of testdata/captures
// whose names match.
func corpusSeeds(f *testing.F, match func(string) bool) [][]byte {
	paths, _ := filepath.Glob("../../../testdata/captures/*/*")
	var out [][]byte
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || st.Size() > 64<<10 || !match(filepath.Base(p)) {
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		f.Fatal("no corpus seeds under testdata/captures")
	}
	return out
}
