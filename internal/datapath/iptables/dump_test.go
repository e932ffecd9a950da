package iptables

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/netdrift/netdrift/internal/model"
)

func TestTokenize(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{`-A X -m comment --comment "a b" -j Y`, []string{"-A", "X", "-m", "comment", "--comment", "a b", "-j", "Y"}},
		{`-A X --comment ns/svc:p -j Y`, []string{"-A", "X", "--comment", "ns/svc:p", "-j", "Y"}},
		{`-A X --comment "say \"hi\"" -j Y`, []string{"-A", "X", "--comment", `say "hi"`, "-j", "Y"}},
		{`-A X --comment a\ b`, []string{"-A", "X", "--comment", "a b"}},
		{"-A\tX  --nfacct-name  n", []string{"-A", "X", "--nfacct-name", "n"}},
		{`-A X --comment ""`, []string{"-A", "X", "--comment", ""}},
	}
	for _, c := range cases {
		got, err := tokenize(c.in, nil)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("tokenize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// ruleView is what a parsed rule reports, for comparing in tests.
type ruleView struct {
	Chain, Src, Dst, Proto, Dport, Comment, Target, ToDest string
	SrcNeg, DstNeg, SrcType, DstLocal, Random, Recent      bool
	Kind                                                   targetKind
}

func viewOf(r *ipRule) ruleView {
	return ruleView{Chain: r.chain, Src: r.src(), Dst: r.dst(), Proto: r.proto(), Dport: r.dport(),
		Comment: r.comment(), Target: r.target(), ToDest: r.toDest(),
		SrcNeg: r.has(flSrcNeg), DstNeg: r.has(flDstNeg), SrcType: r.has(flSrcType), DstLocal: r.has(flDstLocal),
		Random: r.has(flRandom), Recent: r.has(flRecent), Kind: r.tkind}
}

func parseTestRule(t *testing.T, line string) *ipRule {
	t.Helper()
	toks, err := tokenize(line, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &ipRule{}
	if err := parseRule(r, toks[1], toks[2:], line); err != nil {
		t.Fatal(err)
	}
	if r.text != line {
		t.Errorf("text = %q, want the line", r.text)
	}
	return r
}

func TestParseRule(t *testing.T) {
	cases := []struct {
		line    string
		want    ruleView
		wantAux string // the values the text does not hold verbatim
	}{{
		line: `-A KUBE-SVC-X ! -s 10.0.0.0/8 -d 10.96.0.1/32 -p TCP -m comment --comment "ns/a:b cluster IP" -m tcp --dport 443 -m statistic --mode random --probability 0.5 -j DNAT --to-destination [fd00::1]:80`,
		want: ruleView{Chain: "KUBE-SVC-X", Src: "10.0.0.0/8", SrcNeg: true, Dst: "10.96.0.1/32", Proto: "tcp", Dport: "443",
			Comment: "ns/a:b cluster IP", Target: "DNAT", Kind: targetDNAT, ToDest: "[fd00::1]:80", Random: true},
		wantAux: "", // -p TCP lower-cased is still in the text: "-m tcp"
	}, {
		line: `-A KUBE-EXT-Y ! -p udp ! -d 10.0.0.1 -m comment --comment "a \"quoted\" name" -m addrtype --dst-type LOCAL ! --dport 53 -m recent --rcheck -j KUBE-SVC-Y`,
		want: ruleView{Chain: "KUBE-EXT-Y", Proto: "!udp", Dst: "10.0.0.1", DstNeg: true, Comment: `a "quoted" name`,
			DstLocal: true, Dport: "!53", Recent: true, Target: "KUBE-SVC-Y", Kind: targetChain},
		wantAux: `!udpa "quoted" name!53`,
	}, {
		line: `-A KUBE-SEP-Z -s 10.1.2.3/32 -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
		want: ruleView{Chain: "KUBE-SEP-Z", Src: "10.1.2.3/32", SrcType: true, Target: "KUBE-MARK-MASQ", Kind: targetMark},
	}}
	for _, c := range cases {
		r := parseTestRule(t, c.line)
		if got := viewOf(r); got != c.want {
			t.Errorf("parseRule(%q):\n got %+v\nwant %+v", c.line, got, c.want)
		}
		if r.aux != c.wantAux {
			t.Errorf("parseRule(%q): aux %q, want %q", c.line, r.aux, c.wantAux)
		}
	}
}

// A rule is kept for every kernel rule (a few per endpoint): its size is
// part of the agent's memory budget (BENCHMARKS.md, "Live: the agent
// beside kube-proxy (issue 16)").
func TestRuleSize(t *testing.T) {
	if got := unsafe.Sizeof(ipRule{}); got > 80 {
		t.Errorf("ipRule is %d bytes, want at most 80 (one 80-byte size class)", got)
	}
}

// A later option of the same kind replaces the earlier value, span or aux.
func TestParseRuleRepeatedOption(t *testing.T) {
	r := parseTestRule(t, `-A X -p TCP -p udp -j Y`)
	if r.proto() != "udp" {
		t.Errorf("proto %q, want the last one, udp", r.proto())
	}
}

// Malformed input is an error naming the line, never a panic.
func TestParseIPTablesMalformed(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"unterminated quote", "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -m comment --comment \"oops -j X\nCOMMIT\n", "line 3: position 39: unterminated quote"},
		{"no commit", "*nat\n:KUBE-SERVICES - [0:0]\n", "line 2: table \"nat\" has no COMMIT"},
		{"rule outside table", "-A KUBE-SERVICES -j X\n", "line 1: "},
		{"undeclared chain", "*nat\n-A KUBE-SERVICES -j X\nCOMMIT\n", "line 2: rule for undeclared chain \"KUBE-SERVICES\""},
		{"nested table", "*nat\n*filter\nCOMMIT\n", "line 2: "},
		{"commit outside", "COMMIT\n", "line 1: COMMIT outside a table"},
		{"bad argument", "*nat\n:X - [0:0]\n-A X foo -j Y\nCOMMIT\n", "line 3: unexpected argument \"foo\""},
		{"two values", "*nat\n:X - [0:0]\n-A X -d 1.2.3.4 5.6.7.8 -j Y\nCOMMIT\n", "line 3: argument 3: -d wants one value, got 2"},
		{"dangling not", "*nat\n:X - [0:0]\n-A X -j Y !\nCOMMIT\n", "line 3: dangling"},
		{"unknown command", "*nat\n:X - [0:0]\n-D X 1\nCOMMIT\n", "line 3: unsupported command \"-D\""},
		{"trailing backslash", "*nat\n:X - [0:0]\n-A X --comment a\\\nCOMMIT\n", "line 3: position 17: trailing backslash"},
		{"bad declaration", "*nat\n:\nCOMMIT\n", "line 2: bad chain declaration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(Dumps{IPv4: []byte(c.text)}, model.Hints{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	_, err := Parse(Dumps{IPv4: []byte("*nat\nCOMMIT\n"), IPv6: []byte("*nat\n")}, model.Hints{})
	if err == nil || !strings.HasPrefix(err.Error(), "IPv6 dump: line 1") {
		t.Errorf("IPv6 error must say which dump: %v", err)
	}
}

// Restore-input commands: -I inserts, -X deletes, -F flushes, counters prefix.
func TestParseDumpCommands(t *testing.T) {
	d, err := parseDump("*nat\n:A - [0:0]\n:B - [0:0]\n-A A -j B\n-I A -j C1\n-I A 2 -j C2\n[5:300] -A B -j D\n-F B\n-N E\n-X E\nCOMMIT\n")
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, r := range d["nat"].rules("A") {
		targets = append(targets, r.target())
	}
	if !reflect.DeepEqual(targets, []string{"C1", "C2", "B"}) {
		t.Errorf("chain A targets %q", targets)
	}
	if len(d["nat"].rules("B")) != 0 {
		t.Error("-F must flush B")
	}
	if _, ok := d["nat"].chains["E"]; ok {
		t.Error("-X must delete E")
	}
}

func TestChooseBackend(t *testing.T) {
	cases := []struct {
		legacy, nft int
		want        string
	}{
		{4851, 0, BackendLegacy},
		{0, 4851, BackendNFT},
		{10, 20, BackendNFT},
		{20, 10, BackendLegacy},
		{0, 0, BackendNFT},
		{-1, 0, BackendNFT},
		{0, -1, BackendLegacy},
		{5, -1, BackendLegacy},
	}
	for _, c := range cases {
		if got, reason := chooseBackend(c.legacy, c.nft); got != c.want || reason == "" {
			t.Errorf("chooseBackend(%d, %d) = %s (%s), want %s", c.legacy, c.nft, got, reason, c.want)
		}
	}
}

func TestKubeChainLines(t *testing.T) {
	dump := []byte("*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -j KUBE-SERVICES\n-A KUBE-SERVICES -j RETURN\nCOMMIT\n")
	if n := kubeChainLines(dump); n != 2 {
		t.Errorf("kubeChainLines = %d, want 2", n)
	}
}

func TestSaveBinaryMissingIsUnsupported(t *testing.T) {
	_, err := saveBinary("no-such-backend", false)
	if !errors.Is(err, model.ErrUnsupported) {
		t.Errorf("missing binary: %v, want model.ErrUnsupported", err)
	}
}

func TestIPTablesBadBackendConfig(t *testing.T) {
	src := &Reader{Config: Config{Backend: "bogus"}}
	if _, err := src.Snapshot(t.Context()); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("bad backend: %v", err)
	}
	if src.Name() != "iptables" {
		t.Errorf("Name() = %q", src.Name())
	}
}
