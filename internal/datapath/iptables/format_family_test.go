package iptables

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

// dumpFamilyFields is DumpFamily as it was written first: every field of
// every line through strings.Fields. The reference for the in-place scan.
func dumpFamilyFields(text []byte) (fam model.IPFamily, mixed, ok bool) {
	v4, v6 := 0, 0
	for line := range strings.SplitSeq(string(text), "\n") {
		prev := ""
		for f := range strings.FieldsSeq(line) {
			switch prev {
			case "-d", "-s", "--destination", "--source", "--to-destination":
				if addr, ok := ruleAddr(f); ok && (addr.Is4() || addr.Is4In6()) {
					v4++
				} else if ok {
					v6++
				}
			}
			prev = f
		}
	}
	switch {
	case v4 > 0 && v6 > 0:
		return "", true, true
	case v6 > 0:
		return model.IPv6, false, true
	case v4 > 0:
		return model.IPv4, false, true
	}
	return "", false, false
}

var dumpFamilyCases = []struct {
	name, text string
	fam        model.IPFamily
	mixed, ok  bool
}{
	{"v4", "*nat\n-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -j KUBE-SVC-X\nCOMMIT\n", model.IPv4, false, true},
	{"v4 DNAT target only", "-A KUBE-SEP-X -p tcp -j DNAT --to-destination 10.1.2.3:80", model.IPv4, false, true},
	{"v6", "-A KUBE-SEP-X -s fd00::1/128 -j KUBE-MARK-MASQ\n-A KUBE-SEP-X -p tcp -j DNAT --to-destination [fd00::1]:80\n", model.IPv6, false, true},
	{"v4-mapped counts as v4", "-A X --source ::ffff:10.0.0.1 -j ACCEPT", model.IPv4, false, true},
	{"mixed", "-A X -d 10.96.0.1/32 -j A\n-A X -d fd00::1/128 -j A\n", "", true, true},
	{"mixed, v6 as a DNAT target after v4 matches", "-A X -d 10.96.0.1/32 -j A\n-A Y -j DNAT --to-destination [fd00::2]:8080\n", "", true, true},
	{"none", "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j KUBE-FIREWALL\nCOMMIT\n", "", false, false},
	{"flag at the end of a line", "-A X -j A -d\n10.0.0.1", "", false, false},
	{"not an address", "-A X -d not-an-ip -j A", "", false, false},
	{"tabs and CR", "-A X\t-d\t10.0.0.1/32\r\n", model.IPv4, false, true},
	{"a Unicode space separates fields", "-A X -d\u00a0fd00::1 -m comment --comment \"é\" -j A", model.IPv6, false, true},
	{"a flag inside a comment is a field too", "-A X -m comment --comment \"ns/a -s fd00::9 x\" -j A", model.IPv6, false, true},
}

func TestDumpFamily(t *testing.T) {
	for _, c := range dumpFamilyCases {
		fam, mixed, ok := DumpFamily([]byte(c.text))
		if fam != c.fam || mixed != c.mixed || ok != c.ok {
			t.Errorf("%s: got %q mixed %v ok %v, want %q %v %v", c.name, fam, mixed, ok, c.fam, c.mixed, c.ok)
		}
		rf, rm, rok := dumpFamilyFields([]byte(c.text))
		if rf != c.fam || rm != c.mixed || rok != c.ok {
			t.Errorf("%s: the reference says %q %v %v: the case is wrong", c.name, rf, rm, rok)
		}
	}
}

func TestDumpFamilyOfGoldenDumps(t *testing.T) {
	for _, name := range []string{"kube-proxy-v1.37/worker-a.iptables-save", "kube-proxy-v1.37/stale.worker-a.iptables-save"} {
		data, err := os.ReadFile(filepath.Join("../../../testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		fam, mixed, ok := DumpFamily(data)
		if fam != model.IPv4 || mixed || !ok {
			t.Errorf("%s: %q mixed %v ok %v, want IPv4", name, fam, mixed, ok)
		}
	}
}

func FuzzDumpFamilyMatchesFields(f *testing.F) {
	for _, c := range dumpFamilyCases {
		f.Add(c.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		fam, mixed, ok := DumpFamily([]byte(text))
		rf, rm, rok := dumpFamilyFields([]byte(text))
		if fam != rf || mixed != rm || ok != rok {
			t.Fatalf("%q: got %q %v %v, the field reading says %q %v %v", text, fam, mixed, ok, rf, rm, rok)
		}
	})
}
