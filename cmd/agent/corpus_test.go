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

// Issue 12 item 3: an IPv6 capture given alone is read; an offline command
// never falls back to the live machine.
func TestOfflineIPv6CaptureAlone(t *testing.T) {
	bin := selfBinary(t)
	for _, tc := range []struct{ flag, file, datapath string }{
		{"--ip6tables-save", "dualstack-ip6tables-alone/node-a.ip6tables-save", "iptables"},
		{"--nft6-json", "dualstack-nft6-alone/ip6.nft.json", "nftables"},
	} {
		out, errs, code := runBin(t, bin, "snapshot", tc.flag, filepath.Join(corpusDir, tc.file), "-o", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.flag, code, errs)
		}
		var r struct {
			Datapath  string `json:"datapath"`
			Frontends []struct {
				Family string `json:"family"`
			} `json:"frontends"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if r.Datapath != tc.datapath || len(r.Frontends) < 3 {
			t.Fatalf("%s: datapath %q with %d frontends, want %s from the file", tc.flag, r.Datapath, len(r.Frontends), tc.datapath)
		}
		for _, f := range r.Frontends {
			if f.Family != "IPv6" {
				t.Errorf("%s: frontend of family %s", tc.flag, f.Family)
			}
		}
	}
	// With a capture, --netns serves the node-level checks only: the
	// datapath is still the file's (the namespace need not even exist).
	out, errs, code := runBin(t, bin, "snapshot", "--ip6tables-save", filepath.Join(corpusDir, "dualstack-ip6tables-alone/node-a.ip6tables-save"), "--netns", "nd-nonexistent")
	if code != 0 || !strings.Contains(out, "datapath iptables") {
		t.Errorf("a capture and --netns: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// Issue 12 item 9: netdrift diff takes --cluster-cidr, validated up front.
func TestDiffClusterCIDR(t *testing.T) {
	bin := selfBinary(t)
	d := filepath.Join(corpusDir, "dualstack-iptables-both")
	args := []string{"diff", "--node", "node-a", "--cluster", filepath.Join(d, "cluster.json"),
		"--iptables-save", filepath.Join(d, "node-a.iptables-save"), "--ip6tables-save", filepath.Join(d, "node-a.ip6tables-save")}
	if _, errs, code := runBin(t, bin, append(args, "--cluster-cidr", "10.244.0.0/16,fd00:10:244::/56")...); code != 0 {
		t.Fatalf("valid --cluster-cidr: exit %d: %s", code, errs)
	}
	out, errs, code := runBin(t, bin, append(args, "--cluster-cidr", "10.244.0.0/16,banana")...)
	if code != 2 || out != "" || !strings.Contains(errs, "--cluster-cidr") || !strings.Contains(errs, "banana") {
		t.Fatalf("bad --cluster-cidr: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// Issue 12 item 12: make demo installs the Debian packages it needs, as
// make test does (both go through the deps target).
func TestDemoInstallsDebianPackages(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	out, err := exec.Command("make", "-C", "../..", "-n", "demo").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n demo: %v\n%s", err, out)
	}
	s := string(out)
	deps := strings.Index(s, "apt-get install")
	build := strings.Index(s, "go build")
	if deps < 0 || build < 0 || deps > build {
		t.Fatalf("make demo must install its Debian packages (deps) before building:\n%s", s)
	}
}
