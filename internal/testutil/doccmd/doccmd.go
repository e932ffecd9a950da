// Package doccmd finds the command lines a page of documentation shows in
// its code blocks, for tests that parse them with the real command tree.
package doccmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// commandStart finds "<program> <command>" where a shell command starts:
// at the line's start (after a "$ " prompt or "sudo"), after a pipe,
// "$(", ";" or "&&" (so "kubectl netdrift" is not "netdrift", nor are
// "-n netdrift" and paths).
func commandStart(program string) *regexp.Regexp {
	return regexp.MustCompile(`(?:^\s*(?:\$ )?(?:sudo )?|\| |\$\(|; |&& )` + regexp.QuoteMeta(program) + ` ([a-z][a-z-]*)`)
}

// Line is one documented command line.
type Line struct {
	Line int      // 1-based line number in the page
	Text string   // the command as written
	Args []string // its arguments after the program name
}

// Commands returns the program's command lines inside ``` blocks:
// from "netdrift" to a comment, pipe, ";", "&&" or ")", with notation
// removed ("[", "]", "...", "<...>", alternatives after "|").
func Commands(doc, program string) []Line {
	start := commandStart(program)
	var out []Line
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
		for _, m := range start.FindAllStringSubmatchIndex(l, -1) {
			seg := l[m[2]-len(program)-1:]
			for _, stop := range []string{" |", ";", "&&", ")", "`"} {
				if k := strings.Index(seg, stop); k >= 0 {
					seg = seg[:k]
				}
			}
			args := splitArgs(seg)[len(strings.Fields(program)):]
			if len(args) == 0 {
				continue
			}
			// "status|drift --node N" is notation for one line per command.
			for _, c := range strings.Split(args[0], "|") {
				alt := append([]string{c}, args[1:]...)
				out = append(out, Line{Line: i + 1, Text: strings.TrimSpace(seg), Args: alt})
			}
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

// Check parses every program command line of files (paths) with parse
// (the real command tree: find the command, parse its flags, check its
// arguments) and fails t for each that does not parse, and when fewer than
// min lines were found (the extraction would be broken).
func Check(t testing.TB, files []string, program string, min int, parse func(args []string) error) {
	t.Helper()
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range Commands(string(b), program) {
			n++
			if err := parse(l.Args); err != nil {
				t.Errorf("%s:%d: %q: %v", filepath.Base(f), l.Line, l.Text, err)
			}
		}
	}
	t.Logf("%d documented %q command lines parsed", n, program)
	if n < min {
		t.Errorf("found only %d documented %q command lines, want at least %d; the extraction is broken", n, program, min)
	}
}

var (
	headingRE = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	fenceRE   = regexp.MustCompile("(?s)```.*?```")
)

// Anchors are the GitHub anchors of a page's headings (outside code
// blocks): lower case, backquotes and punctuation other than - and _
// dropped, spaces to -.
func Anchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(md, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}
