// Package golden compares test output with golden files and rewrites them
// when the tests run with -update (go test ./pkg -update).
//
// It registers the -update flag on the default flag set, so a test binary
// that imports it must not define its own -update.
package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files with what the tests produce")

// Update reports whether the tests run with -update.
func Update() bool { return *update }

// Check compares got with the file at path. With -update it writes got to
// path instead, creating the directory.
func Check(tb testing.TB, path string, got []byte) {
	tb.Helper()
	if Update() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (go test -run '%s' -update creates it)", err, tb.Name())
	}
	if string(got) != string(want) {
		tb.Errorf("%s differs from the golden file (go test -run '%s' -update rewrites it after review):\n%s",
			path, tb.Name(), Diff(string(want), string(got)))
	}
}

// maxDiffLines bounds how many differing lines Diff shows.
const maxDiffLines = 10

// Diff lists the lines that differ between want (-) and got (+), by line
// number, up to maxDiffLines of them.
func Diff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	fmt.Fprintf(&b, "want %d lines, got %d\n", len(wl), len(gl))
	shown := 0
	for i := 0; i < max(len(wl), len(gl)); i++ {
		w, g := lineAt(wl, i), lineAt(gl, i)
		if w == g {
			continue
		}
		if shown == maxDiffLines {
			b.WriteString("(more differences not shown)\n")
			break
		}
		shown++
		fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, w, g)
	}
	return b.String()
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(no line)"
}
