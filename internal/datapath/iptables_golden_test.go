package datapath

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The -update flag rewrites golden files. Several parsers in this package
// share it, so it is registered only once, whoever comes first.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// checkGolden compares got with testdata/iptables/NAME, or rewrites it.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "iptables", name)
	if updateGolden() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file; diff:\n%s\n(run with -update if the change is intended)", name, lineDiff(string(want), got))
	}
}

// lineDiff shows the first differing lines (enough to see what changed).
func lineDiff(want, got string) string {
	wl, gl := splitLines(want), splitLines(got)
	out := ""
	shown := 0
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			out += "line " + strconv.Itoa(i+1) + ":\n- " + w + "\n+ " + g + "\n"
			if shown++; shown > 10 {
				break
			}
		}
	}
	return out
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "iptables", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
