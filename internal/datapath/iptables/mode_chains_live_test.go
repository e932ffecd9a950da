//go:build linux

package iptables

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// stubSaveCommands puts save commands that run script first in PATH, for
// both backends and families: iptables-save "absent or broken" while the
// iptables command itself runs.
func stubSaveCommands(t *testing.T, script string) {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{"iptables-nft-save", "iptables-legacy-save", "ip6tables-nft-save", "ip6tables-legacy-save"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestModeChainsWhenSaveFails: when the iptables-save read is refused or
// hangs, the iptables mode reads kube-proxy's chains one by one and finds
// what iptables-save found, says so in the warnings and reports the
// fallback (from iptables-save to the per-chain read, with the reason) for
// /v1/status; on each backend.
func TestModeChainsWhenSaveFails(t *testing.T) {
	rules := readTestdata(t, "restore-input.iptables")
	for _, backend := range []string{BackendLegacy, BackendNFT} {
		for _, c := range []struct{ name, script, reason string }{
			{"refused", "echo 'permission denied (you must be root)' >&2; exit 4", "permission denied"},
			{"hangs", "exec sleep 60", "no answer within"},
		} {
			t.Run(backend+"/"+c.name, func(t *testing.T) {
				requireBackend(t, backend, false)
				ns := newTestNetns(t)
				if err := restoreInto(ns, backend, false, rules); err != nil {
					t.Fatal(err)
				}
				want := snapshot(t, &Reader{Config: Config{NetNS: ns, Backend: backend}})
				stubSaveCommands(t, c.script)
				for _, cfg := range []string{BackendAuto, backend} {
					k := &Mode{r: &Reader{Config: Config{NetNS: ns, Backend: cfg}}, netns: ns}
					k.chains.timeout = time.Second
					checkChainsFallback(t, k, want, c.reason)
				}
			})
		}
	}
}

// checkChainsFallback reads with k, whose iptables-save fails for reason,
// and checks it found want by the per-chain read and says so.
func checkChainsFallback(t *testing.T, k *Mode, want model.Observed, reason string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs, err := k.Snapshot(ctx)
	if err != nil {
		t.Fatalf("backend config %q: %v", k.r.Config.Backend, err)
	}
	if !reflect.DeepEqual(obs.Frontends, want.Frontends) {
		assertSameVerdicts(t, obs, want)
		t.Fatalf("backend config %q: per-chain fallback: %d frontends, iptables-save read %d", k.r.Config.Backend, len(obs.Frontends), len(want.Frontends))
	}
	if n := len(obs.Warnings); n == 0 || !strings.Contains(obs.Warnings[n-1], "read chain by chain") || !strings.Contains(obs.Warnings[n-1], reason) {
		t.Errorf("warnings %q: want the per-chain note with the reason %q", obs.Warnings, reason)
	}
	from, to, why, since := k.Fallback()
	if from != "iptables-save" || to != "iptables -S per chain" || !strings.Contains(why, reason) || since.IsZero() {
		t.Errorf("fallback %q -> %q (%q, since %v): want iptables-save -> per chain, %q", from, to, why, since, reason)
	}
	if k.LastReadCPU() <= 0 {
		t.Errorf("read cost %v: want the per-chain read's", k.LastReadCPU())
	}
}

// TestModeChainsFailToo: when the per-chain read fails as well (here the
// namespace is gone), the error names both reads.
func TestModeChainsFailToo(t *testing.T) {
	requireBackend(t, BackendNFT, false)
	ns := "nd-dpipt-gone"
	k := &Mode{r: &Reader{Config: Config{NetNS: ns, Backend: BackendNFT}}, netns: ns}
	_, err := k.Snapshot(context.Background())
	if err == nil || !strings.Contains(err.Error(), "iptables-save: ") || !strings.Contains(err.Error(), "per-chain read: ") ||
		!strings.Contains(err.Error(), ns) {
		t.Fatalf("both reads failing: %v; want an error naming both", err)
	}
	t.Log(err)
}

// TestReaderAutoSaveFailsIsNoEvidence: in auto mode an iptables-nft-save
// that runs but fails makes the read fail with its error; it does not pick
// the legacy backend, which has no tables, and report nothing programmed.
func TestReaderAutoSaveFailsIsNoEvidence(t *testing.T) {
	requireBackend(t, BackendNFT, false)
	ns := newTestNetns(t)
	if err := restoreInto(ns, BackendNFT, false, readTestdata(t, "restore-input.iptables")); err != nil {
		t.Fatal(err)
	}
	stubSaveCommands(t, "echo 'refused by policy' >&2; exit 1")
	_, _, err := (&Reader{Config: Config{NetNS: ns}}).Fetch(context.Background())
	if err == nil || !strings.Contains(err.Error(), "refused by policy") {
		t.Fatalf("auto read with a failing iptables-nft-save: %v; want its error", err)
	}
}
