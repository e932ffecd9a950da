//go:build linux

package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// newTestNetns creates an empty named network namespace, removed on cleanup.
func newTestNetns(t testing.TB) string {
	t.Helper()
	return netnstest.New(t, "nd-dpipt")
}

// requireBackend skips when the backend's tools are missing or the kernel
// cannot hold its tables, saying why.
func requireBackend(t testing.TB, backend string, v6 bool) {
	t.Helper()
	for _, tool := range []string{"save", "restore"} {
		prefix := "iptables"
		if v6 {
			prefix = "ip6tables"
		}
		if _, err := findBinary(prefix + "-" + backend + "-" + tool); err != nil {
			t.Skipf("backend %s unavailable: %v", backend, err)
		}
	}
	ns := newTestNetns(t)
	if err := restoreInto(ns, backend, v6, []byte("*nat\nCOMMIT\n")); err != nil {
		t.Skipf("kernel lacks the %s backend: %v", backend, err)
	}
}

// restoreInto loads rules into a test netns (test setup only: the reader
// itself never writes).
func restoreInto(ns, backend string, v6 bool, rules []byte) error {
	prefix := "iptables"
	if v6 {
		prefix = "ip6tables"
	}
	bin, err := findBinary(prefix + "-" + backend + "-restore")
	if err != nil {
		return err
	}
	cmd := netnstest.Cmd(ns, bin)
	cmd.Stdin = bytes.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-%s-restore: %v: %s", prefix, backend, err, out)
	}
	return nil
}

var nfacctName = regexp.MustCompile(`--nfacct-name\s+(\S+)`)

// addNFAcct creates the nfacct objects a ruleset's "-m nfacct" matches name
// (kube-proxy creates them before restoring), over nfnetlink in the netns.
func addNFAcct(t *testing.T, ns string, rules []byte) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range nfacctName.FindAllSubmatch(rules, -1) {
		name := string(m[1])
		if seen[name] {
			continue
		}
		seen[name] = true
		if err := nfacctNew(ns, name); err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) {
				t.Skipf("kernel lacks nfnetlink_acct (needed by the ruleset's -m nfacct): %v", err)
			}
			t.Fatalf("create nfacct object %s: %v", name, err)
		}
	}
}

func nfacctNew(ns, name string) error {
	f, err := os.Open(filepath.Join("/run/netns", ns))
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(f.Fd())})
	if err != nil {
		return err
	}
	defer c.Close()
	ae := netlink.NewAttributeEncoder()
	ae.String(1, name) // NFACCT_NAME
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	const nfnlSubsysAcct, nfnlMsgAcctNew = 7, 0
	_, err = c.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(nfnlSubsysAcct<<8 | nfnlMsgAcctNew),
			Flags: netlink.Request | netlink.Acknowledge | netlink.Create,
		},
		Data: append([]byte{unix.AF_UNSPEC, 0, 0, 0}, attrs...), // nfgenmsg
	})
	return err
}

// verdictsOnly drops evidence (its formatting depends on who wrote the text).
func verdictsOnly(obs model.Observed) map[model.Frontend]model.Verdict {
	out := map[model.Frontend]model.Verdict{}
	for f, v := range obs.Frontends {
		v.Evidence = nil
		out[f] = v
	}
	return out
}

func assertSameVerdicts(t *testing.T, live, offline model.Observed) {
	t.Helper()
	lv, ov := verdictsOnly(live), verdictsOnly(offline)
	if len(lv) != len(ov) {
		t.Errorf("live reader sees %d frontends, offline parse %d", len(lv), len(ov))
	}
	for f, want := range ov {
		got, ok := lv[f]
		if !ok {
			t.Errorf("live reader misses %s %s", f.Kind, f)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s: live %+v, offline %+v", f.Kind, f, got, want)
		}
	}
	for f := range lv {
		if _, ok := ov[f]; !ok {
			t.Errorf("live reader has extra %s %s", f.Kind, f)
		}
	}
	if !reflect.DeepEqual(live.Warnings, offline.Warnings) {
		t.Errorf("warnings differ:\nlive    %q\noffline %q", live.Warnings, offline.Warnings)
	}
}

func snapshot(t *testing.T, src *Reader) model.Observed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

// TestIPTablesLiveFixture restores worker-a's real kube-proxy ruleset into a
// fresh netns with each backend and reads it back with the live reader.
func TestIPTablesLiveFixture(t *testing.T) {
	rules := readTestdata(t, "worker-a.iptables-save")
	offline, err := Parse(Dumps{IPv4: rules}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{BackendLegacy, BackendNFT} {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend, false)
			ns := newTestNetns(t)
			addNFAcct(t, ns, rules)
			if err := restoreInto(ns, backend, false, rules); err != nil {
				t.Fatal(err)
			}
			for _, cfg := range []string{backend, BackendAuto} {
				src := &Reader{Config: Config{NetNS: ns, Backend: cfg}}
				live := snapshot(t, src)
				assertSameVerdicts(t, live, offline)
				st := src.Stats()
				if st.Backend != backend || st.Duration <= 0 || st.Bytes < len(rules)/2 {
					t.Errorf("config %s: stats %+v: want backend %s, a duration and the dump size", cfg, st, backend)
				}
				t.Logf("config %s: backend %s (%s), dump %v wall, %v CPU, %d bytes", cfg, st.Backend, st.Reason, st.Duration, st.CPU, st.Bytes)
			}
		})
	}
}

// TestIPTablesLiveAutoPicksKubeBackend: with tables in both backends, auto
// picks the one holding kube-proxy's chains, like kube-proxy's image.
func TestIPTablesLiveAutoPicksKubeBackend(t *testing.T) {
	requireBackend(t, BackendLegacy, false)
	requireBackend(t, BackendNFT, false)
	rules := readTestdata(t, "restore-input.iptables")
	other := []byte("*nat\n:OTHER - [0:0]\n-A OTHER -j RETURN\nCOMMIT\n")
	for _, kube := range []string{BackendLegacy, BackendNFT} {
		t.Run(kube, func(t *testing.T) {
			ns := newTestNetns(t)
			for _, b := range []string{BackendLegacy, BackendNFT} {
				r := other
				if b == kube {
					r = rules
				}
				if err := restoreInto(ns, b, false, r); err != nil {
					t.Fatal(err)
				}
			}
			src := &Reader{Config: Config{NetNS: ns}}
			obs := snapshot(t, src)
			if st := src.Stats(); st.Backend != kube {
				t.Fatalf("auto chose %s (%s), want %s", st.Backend, st.Reason, kube)
			}
			assertFrontends(t, obs, nil, restoreInputWant)
		})
	}
}

// TestIPTablesLiveRestoreRoundTrip feeds kube-proxy-format restore input to
// each backend; the live reader must see what the offline parse of the input
// sees, and the saved text must parse like the stored round-trip dump.
func TestIPTablesLiveRestoreRoundTrip(t *testing.T) {
	rules := readTestdata(t, "restore-input.iptables")
	offline, err := Parse(Dumps{IPv4: rules}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := Parse(v4(t, "restore-input.roundtrip.iptables-save"), model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{BackendLegacy, BackendNFT} {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend, false)
			ns := newTestNetns(t)
			if err := restoreInto(ns, backend, false, rules); err != nil {
				t.Fatal(err)
			}
			src := &Reader{Config: Config{NetNS: ns, Backend: backend}}
			dumps, _, err := src.Fetch(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			live, err := Parse(dumps, model.Hints{})
			if err != nil {
				t.Fatal(err)
			}
			assertSameVerdicts(t, live, offline)
			if !reflect.DeepEqual(live, stored) {
				t.Errorf("the %s round trip parses differently from restore-input.roundtrip.iptables-save (evidence included)", backend)
			}
		})
	}
}

// TestIPTablesLiveDualStack reads IPv4 and IPv6 rules of both backends.
func TestIPTablesLiveDualStack(t *testing.T) {
	r4, r6 := readTestdata(t, "dualstack.v4.iptables-save"), readTestdata(t, "dualstack.v6.iptables-save")
	offline, err := Parse(Dumps{IPv4: r4, IPv6: r6}, model.Hints{})
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{BackendLegacy, BackendNFT} {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend, false)
			requireBackend(t, backend, true)
			ns := newTestNetns(t)
			addNFAcct(t, ns, r4)
			if err := restoreInto(ns, backend, false, r4); err != nil {
				t.Fatal(err)
			}
			if err := restoreInto(ns, backend, true, r6); err != nil {
				t.Fatal(err)
			}
			live := snapshot(t, &Reader{Config: Config{NetNS: ns, Backend: backend, IPv6: true}})
			assertSameVerdicts(t, live, offline)
		})
	}
}

// An empty netns has no kube-proxy state: no frontends, and a warning.
func TestIPTablesLiveEmptyNetns(t *testing.T) {
	ns := newTestNetns(t)
	src := &Reader{Config: Config{NetNS: ns}}
	obs := snapshot(t, src)
	if len(obs.Frontends) != 0 || !containsWarning(obs.Warnings, "KUBE-SERVICES") {
		t.Errorf("empty netns: %d frontends, warnings %q", len(obs.Frontends), obs.Warnings)
	}
	if _, err := os.Stat("/proc/net/ip_tables_names"); err == nil {
		out, _ := netnstest.Cmd(ns, "cat", "/proc/net/ip_tables_names").Output()
		if bytes.Contains(out, []byte("nat")) {
			t.Errorf("auto detection instantiated legacy tables in %s: %q", ns, out)
		}
	}
}
