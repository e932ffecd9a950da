package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/cli"
)

// docFiles are the pages whose code blocks show netdrift command lines.
var docFiles = []string{"../../README.md", "../../docs/runbook.md", "../../docs/install.md",
	"../../docs/api.md", "../../docs/architecture.md", "../../lab/README.md"}

// TestDocumentedCommandsParse: every `netdrift ...` command line in a code
// block of the docs names a command that exists, with flags it defines and
// as many arguments as it takes — parsed by the binary's own command tree,
// so a renamed flag or command fails here, not in a responder's terminal.
func TestDocumentedCommandsParse(t *testing.T) {
	n := 0
	for _, f := range docFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, dl := range documentedCommands(string(b)) {
			n++
			root := cli.NewRoot("netdrift", cli.Env{}, newAgentCommand())
			root.InitDefaultHelpCmd()
			root.InitDefaultCompletionCmd()
			cmd, rest, err := root.Find(dl.args)
			if err != nil || cmd == root {
				t.Errorf("%s:%d: %q: no such command (%v)", filepath.Base(f), dl.line, dl.text, err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s:%d: %q: %v", filepath.Base(f), dl.line, dl.text, err)
				continue
			}
			if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
				t.Errorf("%s:%d: %q: %v", filepath.Base(f), dl.line, dl.text, err)
			}
		}
	}
	t.Logf("%d documented command lines parsed", n)
	if n < 20 {
		t.Errorf("found only %d documented command lines; the extraction is broken", n)
	}
}

type docLine struct {
	line int
	text string
	args []string
}

// commandStart finds "netdrift <command>" where a shell command starts: at
// the line's start (after a "$ " prompt or "sudo"), after a pipe, "$(",
// ";" or "&&" ("kubectl netdrift", "-n netdrift" and paths are other
// things).
var commandStart = regexp.MustCompile(`(?:^\s*(?:\$ )?(?:sudo )?|\| |\$\(|; |&& )netdrift ([a-z][a-z-]*)`)

// documentedCommands returns the netdrift command lines inside ``` blocks:
// from "netdrift" to a comment, pipe, ";", "&&" or ")", with notation
// removed ("[", "]", "...", "<...>", alternatives after "|").
func documentedCommands(doc string) []docLine {
	var out []docLine
	in := false
	for i, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			continue
		}
		if !in {
			continue
		}
		if k := strings.Index(l, " #"); k >= 0 {
			l = l[:k]
		}
		for _, m := range commandStart.FindAllStringSubmatchIndex(l, -1) {
			seg := l[m[2]-len("netdrift "):]
			for _, stop := range []string{" |", ";", "&&", ")", "`"} {
				if k := strings.Index(seg, stop); k >= 0 {
					seg = seg[:k]
				}
			}
			args := splitArgs(seg)[1:]
			if len(args) == 0 {
				continue
			}
			out = append(out, docLine{line: i + 1, text: strings.TrimSpace(seg), args: args})
		}
	}
	return out
}

// splitArgs splits a shell-like line: quotes group, "$(...)" and "<...>"
// stand for one value, notation tokens are dropped.
func splitArgs(s string) []string {
	var args []string
	var cur strings.Builder
	quote := byte(0)
	flush := func() {
		a := strings.Trim(cur.String(), "[]")
		cur.Reset()
		switch a {
		case "", "\\":
			return
		case "...", "…": // a placeholder value
			a = "VALUE"
		}
		args = append(args, a)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote = c
		case c == ' ' || c == '\t':
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return args
}

// TestDocumentedCommandsExtraction pins the extraction on a sample.
func TestDocumentedCommandsExtraction(t *testing.T) {
	doc := "text netdrift status\n```\n$ netdrift status --agent ... -o wide   # comment\n" +
		"kubectl netdrift status --node n1\nkubectl get svc -o json | netdrift diff --cluster - --node a\n" +
		"netdrift snapshot [--netns NAME]\nhelm install netdrift deploy/helm/netdrift\nkubectl -n netdrift get pods\n" +
		"make demo   # netdrift finds lag\n```\n"
	got := documentedCommands(doc)
	want := [][]string{{"status", "--agent", "VALUE", "-o", "wide"}, {"diff", "--cluster", "-", "--node", "a"}, {"snapshot", "--netns", "NAME"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %d lines", got, len(want))
	}
	for i := range want {
		if strings.Join(got[i].args, " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d: %q, want %q", i, got[i].args, want[i])
		}
	}
}
