package scenarios

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/lab/labenv"
)

// The shell command lines of docs/install.md and docs/runbook.md, and which
// test runs each: a check that fails when either page shows a command no
// test runs.

// docPages are the pages whose every shell line a test runs.
var docPages = []string{"install.md", "runbook.md"}

// docLine is one shell command line of a page's ```sh blocks.
type docLine struct {
	Page string
	Line int    // 1-based, where the command starts
	Text string // continuation lines joined, the comment cut
}

func (l docLine) key() string { return l.Page + "\x00" + l.Text }

// docShellLines returns the command lines of md's sh/bash/shell blocks:
// a line ending in "\" continues on the next, a comment (" #" outside
// quotes) is cut, and a comment "# or: CMD" adds CMD as a line of its own
// (an alternative the page offers).
func docShellLines(page, md string) []docLine {
	var out []docLine
	in, shell := false, false
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(md, "\n") {
		t := strings.TrimSpace(raw)
		if strings.HasPrefix(t, "```") {
			in = !in
			lang := strings.TrimPrefix(t, "```")
			shell = in && (lang == "sh" || lang == "bash" || lang == "shell")
			continue
		}
		if !in || !shell || t == "" {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(t, "\\") {
			cur.WriteString(strings.TrimSuffix(t, "\\"))
			continue
		}
		cur.WriteString(t)
		cmd, comment := cutComment(cur.String())
		cur.Reset()
		out = append(out, docLine{Page: page, Line: start, Text: cmd})
		if alt, ok := strings.CutPrefix(comment, "or: "); ok {
			out = append(out, docLine{Page: page, Line: start, Text: strings.TrimSpace(alt)})
		}
	}
	return out
}

// cutComment splits a shell line at its comment (a "#" after a blank,
// outside quotes).
func cutComment(s string) (cmd, comment string) {
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && i > 0 && (s[i-1] == ' ' || s[i-1] == '\t'):
			return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
		}
	}
	return strings.TrimSpace(s), ""
}

func readDocLines(t *testing.T) []docLine {
	t.Helper()
	var out []docLine
	for _, p := range docPages {
		b, err := os.ReadFile(filepath.Join(labenv.ModuleDir(), "..", "docs", p))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, docShellLines(p, string(b))...)
	}
	return out
}

// docNotRun are the lines no test runs, and why.
var docNotRun = map[string]string{
	"install.md\x00make image IMAGE=registry.example/netdrift:0.1.0 && podman push registry.example/netdrift:0.1.0": "pushes to the reader's own registry; `make image` is the project's target, `make test-image` runs the image it builds",
}

// makeTargetRE finds the targets of a makefile rule line.
var makeTargetRE = regexp.MustCompile(`(?m)^([a-zA-Z0-9_.-]+(?: +[a-zA-Z0-9_.-]+)*) *:[^=]`)

func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	root := filepath.Join(labenv.ModuleDir(), "..")
	files, _ := filepath.Glob(filepath.Join(root, "mk", "*.mk"))
	out := map[string]bool{}
	for _, f := range append(files, filepath.Join(root, "Makefile")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range makeTargetRE.FindAllStringSubmatch(string(b), -1) {
			for _, name := range strings.Fields(m[1]) {
				out[name] = true
			}
		}
	}
	return out
}

// docRunner names the test that runs l, or "" when none does.
func docRunner(l docLine, targets map[string]bool) string {
	if why, ok := docNotRun[l.key()]; ok {
		return "not run: " + why
	}
	if docsScenarioLines[l.key()] {
		return "TestScenarios/iptables/docs"
	}
	if l.Page == "runbook.md" && strings.HasPrefix(l.Text, "kubectl netdrift ") {
		return "TestScenarios/*/plugin (runRunbookCommands)"
	}
	if args := strings.Fields(l.Text); len(args) >= 2 && args[0] == "make" && targets[args[1]] && !strings.ContainsAny(l.Text, "&|;") {
		return "make " + args[1] + ": the project's own target (CI, or whoever builds)"
	}
	return ""
}

// TestDocCommandsRun: every shell line of the two pages has a test that
// runs it (or a stated reason), and every line the docs scenario runs is
// still on its page.
func TestDocCommandsRun(t *testing.T) {
	lines := readDocLines(t)
	targets := makeTargets(t)
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l.key()] = true
		r := docRunner(l, targets)
		if r == "" {
			t.Errorf("%s:%d: %q: no test runs this command; run it in the docs scenario (lab/scenarios/docs_test.go) or say in docNotRun why not", l.Page, l.Line, l.Text)
			continue
		}
		t.Logf("%s:%d: %s  <- %s", l.Page, l.Line, l.Text, r)
	}
	for k := range docsScenarioLines {
		if !seen[k] {
			page, text, _ := strings.Cut(k, "\x00")
			t.Errorf("the docs scenario runs %q, which %s no longer shows: update docsScenarioLines and the scenario", text, page)
		}
	}
	if len(lines) < 30 {
		t.Errorf("found %d shell lines in %v; the extraction is broken", len(lines), docPages)
	}
}

// TestDocShellLines pins the extraction on a sample.
func TestDocShellLines(t *testing.T) {
	md := "```sh\nhelm install a b \\\n  --set x=1   # note\nkubectl apply -k o/   # or: kubectl apply -f d.yaml\n" +
		"kubectl get x -o json | jq -r '.a # b'\n```\n```yaml\nkey: v\n```\n   ```sh\n   make x\n   ```\n"
	got := docShellLines("p.md", md)
	want := []string{"helm install a b --set x=1", "kubectl apply -k o/", "kubectl apply -f d.yaml",
		"kubectl get x -o json | jq -r '.a # b'", "make x"}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %q", got, want)
	}
	for i, w := range want {
		if got[i].Text != w {
			t.Errorf("line %d: %q, want %q", i, got[i].Text, w)
		}
	}
	if got[0].Line != 2 || got[4].Line != 11 {
		t.Errorf("line numbers %d, %d; want 2, 11", got[0].Line, got[4].Line)
	}
}
