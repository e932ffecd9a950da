package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	d := Diff("a\nb\nc\n", "a\nB\nc\nd\n")
	for _, want := range []string{"want 4 lines, got 5", "line 2:\n- b\n+ B", "line 4:\n- \n+ d", "line 5:\n- (no line)\n+ "} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "line 1:") || strings.Contains(d, "line 3:") {
		t.Errorf("diff shows equal lines:\n%s", d)
	}
	many := Diff(strings.Repeat("x\n", 30), strings.Repeat("y\n", 30))
	if n := strings.Count(many, "\n- "); n != maxDiffLines || !strings.Contains(many, "more differences not shown") {
		t.Errorf("%d lines shown, want %d and a note:\n%s", n, maxDiffLines, many)
	}
}

func TestCheckWritesWithUpdateAndThenMatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "out.golden")
	defer func(old bool) { *update = old }(*update)
	*update = true
	Check(t, path, []byte("hello\n"))
	if b, err := os.ReadFile(path); err != nil || string(b) != "hello\n" {
		t.Fatalf("written %q, %v", b, err)
	}
	*update = false
	Check(t, path, []byte("hello\n"))
}
