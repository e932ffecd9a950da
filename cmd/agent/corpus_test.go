package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/captures/*/expected.txt from the current output")

// corpusDir is the project's corpus of real captures: one directory per
// capture with its dump(s), cluster objects, args (the `netdrift diff`
// arguments, one per line, paths relative to the directory), expected.txt
// (exit status, table, stderr) and ORIGIN.md (where it comes from).
const corpusDir = "../../testdata/captures"

// TestCorpus runs `netdrift diff` as a process on every capture of the
// corpus and compares the exit status, the table and stderr with the
// checked-in answer. The JSON report must carry the same findings and
// warnings as the table.
func TestCorpus(t *testing.T) {
	bin := selfBinary(t)
	dirs, err := filepath.Glob(filepath.Join(corpusDir, "*", "args"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no corpus under %s (%v)", corpusDir, err)
	}
	for _, argsFile := range dirs {
		dir := filepath.Dir(argsFile)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, "ORIGIN.md")); err != nil {
				t.Errorf("capture without ORIGIN.md: %v", err)
			}
			args := corpusArgs(t, dir, argsFile)
			out, errs, code := runIn(t, dir, bin, args...)
			got := "exit " + strconv.Itoa(code) + "\n" + out
			if errs != "" {
				got += "--- stderr\n" + errs
			}
			exp := filepath.Join(dir, "expected.txt")
			if *updateCorpus {
				if err := os.WriteFile(exp, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(exp)
			if err != nil {
				t.Fatalf("%v (run go test ./cmd/agent -run TestCorpus -update-corpus, then review)", err)
			}
			if got != string(want) {
				t.Errorf("netdrift %s\ngot:\n%s\nwant:\n%s", strings.Join(args, " "), got, want)
			}
			if code == 2 {
				if out != "" || errs == "" {
					t.Errorf("an error must print to stderr only: stdout %q stderr %q", out, errs)
				}
				return
			}
			jout, jerrs, jcode := runIn(t, dir, bin, append(args, "-o", "json")...)
			if jcode != code {
				t.Fatalf("-o json exit %d, table exit %d: %s", jcode, code, jerrs)
			}
			var rep struct {
				Findings []json.RawMessage `json:"findings"`
				Warnings []string          `json:"warnings"`
			}
			if err := json.Unmarshal([]byte(jout), &rep); err != nil {
				t.Fatal(err)
			}
			var tableWarnings []string
			for _, l := range strings.Split(out, "\n") {
				if w, ok := strings.CutPrefix(l, "warning: "); ok {
					tableWarnings = append(tableWarnings, w)
				}
			}
			if strings.Join(rep.Warnings, "\n") != strings.Join(tableWarnings, "\n") {
				t.Errorf("JSON warnings differ from the table's:\njson:  %q\ntable: %q", rep.Warnings, tableWarnings)
			}
			if !strings.Contains(out, "findings "+strconv.Itoa(len(rep.Findings))+"\n") {
				t.Errorf("JSON has %d findings, the table says otherwise:\n%s", len(rep.Findings), out)
			}
		})
	}
}

// runIn runs netdrift in dir (so messages name files as the args do).
func runIn(t *testing.T, dir, bin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NETDRIFT_AS_MAIN=1")
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// corpusArgs reads a capture's args file: one argument per line.
func corpusArgs(t *testing.T, dir, argsFile string) []string {
	t.Helper()
	b, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"diff"}
	for _, a := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		args = append(args, a)
	}
	return args
}
