package doccmd

import (
	"strings"
	"testing"
)

// TestDocumentedCommandsExtraction pins the extraction on a sample.
func TestDocumentedCommandsExtraction(t *testing.T) {
	doc := "text netdrift status\n```\n$ netdrift status --agent ... -o wide   # comment\n" +
		"kubectl netdrift status --node n1\nkubectl get svc -o json | netdrift diff --cluster - --node a\n" +
		"netdrift snapshot [--netns NAME]\nhelm install netdrift deploy/helm/netdrift\nkubectl -n netdrift get pods\n" +
		"make demo   # netdrift finds lag\n```\n"
	got := Commands(doc, "netdrift")
	want := [][]string{{"status", "--agent", "VALUE", "-o", "wide"}, {"diff", "--cluster", "-", "--node", "a"}, {"snapshot", "--netns", "NAME"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %d lines", got, len(want))
	}
	for i := range want {
		if strings.Join(got[i].Args, " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d: %q, want %q", i, got[i].Args, want[i])
		}
	}
}

// TestPluginLines: a two-word program is found at a line's start only.
func TestPluginLines(t *testing.T) {
	doc := "```\nkubectl netdrift status --node n1 -o json\nnetdrift status\nkubectl netdrift lag|rsts --node n2\n```\n"
	got := Commands(doc, "kubectl netdrift")
	if len(got) != 3 || strings.Join(got[0].Args, " ") != "status --node n1 -o json" ||
		strings.Join(got[1].Args, " ") != "lag --node n2" || strings.Join(got[2].Args, " ") != "rsts --node n2" {
		t.Errorf("got %+v", got)
	}
}
