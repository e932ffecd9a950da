//go:build linux

package iptables

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	goiptables "github.com/coreos/go-iptables/iptables"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// TestProbeBinaries: each command found reports the version its own
// --version prints, and the backend its name says.
func TestProbeBinaries(t *testing.T) {
	bins := ProbeBinaries()
	if len(bins) != 2 || bins[0].Backend != BackendNFT || bins[1].Backend != BackendLegacy {
		t.Fatalf("probe: %+v, want nft then legacy", bins)
	}
	mode := map[string]string{BackendNFT: "(nf_tables)", BackendLegacy: "(legacy)"}
	found := 0
	for _, b := range bins {
		if b.Err != nil {
			t.Logf("%s", b)
			continue
		}
		found++
		out, err := exec.Command(b.Path, "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", b.Path, err)
		}
		if !strings.Contains(string(out), "v"+b.Version+" ") || !strings.Contains(string(out), mode[b.Backend]) {
			t.Errorf("%s: probe says %q; the command prints %q", b.Path, b, out)
		}
	}
	if found == 0 {
		t.Skip("neither iptables-nft nor iptables-legacy is installed")
	}
	if s, ok := BinariesSummary(bins); !ok || !strings.Contains(s, "iptables-nft") || !strings.Contains(s, "iptables-legacy") {
		t.Errorf("summary %q, usable %v", s, ok)
	}
}

// TestProbeBinariesBadCommand: a command that prints no version is
// reported with go-iptables' reason, and the other backend still counts.
func TestProbeBinariesBadCommand(t *testing.T) {
	if _, err := findBinary("iptables-legacy"); err != nil {
		t.Skipf("iptables-legacy not installed: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "iptables-nft"), []byte("#!/bin/sh\necho no version here\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir) // iptables-legacy is then found in /usr/sbin or /sbin
	bins := ProbeBinaries()
	if bins[0].Err == nil || bins[0].Version != "" || !strings.Contains(bins[0].String(), "iptables-nft: ") {
		t.Errorf("a command without a version: %+v", bins[0])
	}
	if s, ok := BinariesSummary(bins); !ok || !strings.Contains(s, "iptables-legacy v") {
		t.Errorf("summary %q, usable %v: want iptables-legacy usable", s, ok)
	}
}

// writeRulesOneByOne loads restore input into the namespace one rule at a
// time with go-iptables (one iptables command per rule, as tools that do
// not use iptables-restore write): ":CHAIN" creates or flushes the chain,
// "-A" appends, "-X" deletes. Test setup only: the reader never writes.
func writeRulesOneByOne(ns, bin string, rules []byte) error {
	return netnstest.DoNamed(ns, func() error {
		ipt, err := goiptables.New(goiptables.Path(bin))
		if err != nil {
			return err
		}
		table := ""
		sc := bufio.NewScanner(bytes.NewReader(rules))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			f := shellWords(line)
			switch {
			case line == "" || line[0] == '#' || line == "COMMIT":
			case line[0] == '*':
				table = line[1:]
			case line[0] == ':':
				err = ipt.ClearChain(table, f[0][1:])
			case f[0] == "-A":
				err = ipt.Append(table, f[1], f[2:]...)
			case f[0] == "-X":
				err = ipt.DeleteChain(table, f[1])
			default:
				err = fmt.Errorf("unexpected line %q", line)
			}
			if err != nil {
				return fmt.Errorf("table %s, %q: %w", table, line, err)
			}
		}
		return sc.Err()
	})
}

// shellWords splits a rule line as a shell would for iptables-restore:
// on spaces, with double-quoted words kept whole.
func shellWords(s string) []string {
	var out []string
	var w strings.Builder
	quoted, in := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				out = append(out, w.String())
				w.Reset()
			}
			in = false
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
}

func TestShellWords(t *testing.T) {
	got := shellWords(`-A X -m comment --comment "a b:c" -j  DNAT ""`)
	want := []string{"-A", "X", "-m", "comment", "--comment", "a b:c", "-j", "DNAT", ""}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestIPTablesLiveRulesWrittenOneByOne: kube-proxy's rules written rule by
// rule with go-iptables into a fresh netns read the same as the offline
// parse of the restore input, with the iptables-save reader and, on the
// nft backend, the netlink reader.
func TestIPTablesLiveRulesWrittenOneByOne(t *testing.T) {
	rules := readTestdata(t, "restore-input.iptables")
	offline, err := Parse(Dumps{IPv4: rules}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{BackendLegacy, BackendNFT} {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend, false)
			bin, err := findBinary("iptables-" + backend)
			if err != nil {
				t.Skipf("backend %s: %v", backend, err)
			}
			ns := newTestNetns(t)
			if err := writeRulesOneByOne(ns, bin, rules); err != nil {
				t.Fatal(err)
			}
			src := &Reader{Config: Config{NetNS: ns, Backend: backend}}
			assertSameVerdicts(t, snapshot(t, src), offline)
			if backend != BackendNFT {
				return
			}
			nr := &NFTReader{NetNS: ns}
			obs, err := nr.Snapshot(context.Background(), model.Hints{})
			if err != nil {
				t.Fatal(err)
			}
			assertSameVerdicts(t, obs, offline)
		})
	}
}
