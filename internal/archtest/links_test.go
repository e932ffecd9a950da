package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/testutil/doccmd"
)

// docPages are the repository's pages whose relative links are checked.
var docPages = []string{"README.md", "BENCHMARKS.md", "docs/api.md", "docs/architecture.md",
	"docs/install.md", "docs/runbook.md", "lab/README.md"}

var (
	linkRE  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fenceRE = regexp.MustCompile("(?s)```.*?```")
)

// TestDocLinksResolve: every relative link of the docs names a file of the
// repository, and its #anchor a heading of that file.
func TestDocLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	n := 0
	for _, page := range docPages {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		text := fenceRE.ReplaceAllString(string(b), "")
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(root, filepath.Dir(page), file)
			if file == "" {
				path = filepath.Join(root, page)
			}
			body, err := os.ReadFile(path)
			if err != nil {
				if _, serr := os.Stat(path); serr == nil { // a directory
					continue
				}
				t.Errorf("%s: link %q: %v", page, target, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !doccmd.Anchors(string(body))[anchor] {
				t.Errorf("%s: link %q: no heading with anchor #%s in %s", page, target, anchor, file)
			}
		}
	}
	if n < 20 {
		t.Errorf("checked only %d relative links; the extraction is broken", n)
	}
}

func TestAnchors(t *testing.T) {
	s := doccmd.Anchors("# netdrift runbook\n## The `kubectl` plugin\n```\n# not a heading\n```\n### API server cost of the agents' watches\n")
	for _, want := range []string{"netdrift-runbook", "the-kubectl-plugin", "api-server-cost-of-the-agents-watches"} {
		if !s[want] {
			t.Errorf("no anchor %q in %v", want, s)
		}
	}
	if s["not-a-heading"] {
		t.Error("a comment line in a code block counted as a heading")
	}
}
