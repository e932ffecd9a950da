//go:build linux

package iptables

import (
	"reflect"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

// TestChainReadLiveSameAsSave: kube-proxy's rules, restored (worker-a's
// real ruleset, the dual-stack fixture) or written rule by rule with
// go-iptables (the restore input), read chain by chain with go-iptables
// parse to the same model.Observed as the iptables-save read of the same
// namespace, frontends, evidence and warnings, on each backend.
func TestChainReadLiveSameAsSave(t *testing.T) {
	for _, backend := range []string{BackendLegacy, BackendNFT} {
		for _, fx := range []struct {
			name     string
			v4, v6   string
			oneByOne bool
		}{
			{"worker-a", "worker-a.iptables-save", "", false},
			{"restore-input", "restore-input.iptables", "", true},
			{"dualstack", "dualstack.v4.iptables-save", "dualstack.v6.iptables-save", false},
		} {
			t.Run(backend+"/"+fx.name, func(t *testing.T) {
				requireBackend(t, backend, fx.v6 != "")
				ns := newTestNetns(t)
				v4 := readTestdata(t, fx.v4)
				addNFAcct(t, ns, v4)
				var err error
				if fx.oneByOne {
					bin, ferr := findBinary("iptables-" + backend)
					if ferr != nil {
						t.Skipf("backend %s: %v", backend, ferr)
					}
					err = writeRulesOneByOne(ns, bin, v4)
				} else {
					err = restoreInto(ns, backend, false, v4)
				}
				if err != nil {
					t.Fatal(err)
				}
				if fx.v6 != "" {
					if err := restoreInto(ns, backend, true, readTestdata(t, fx.v6)); err != nil {
						t.Fatal(err)
					}
				}
				save := snapshot(t, &Reader{Config: Config{NetNS: ns, Backend: backend, IPv6: fx.v6 != ""}})
				if len(save.Frontends) == 0 {
					t.Fatalf("the iptables-save read found no frontend")
				}
				d, st, err := chainRead(ns, backend, fx.v6 != "")
				if err != nil {
					t.Fatal(err)
				}
				chains, err := Parse(d, model.Hints{})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(chains.Frontends, save.Frontends) {
					assertSameVerdicts(t, chains, save)
					t.Fatalf("per-chain read: %d frontends, iptables-save read %d: not the same (evidence or verdicts)", len(chains.Frontends), len(save.Frontends))
				}
				if !reflect.DeepEqual(chains.Warnings, save.Warnings) {
					t.Errorf("warnings: per-chain read %q, iptables-save read %q", chains.Warnings, save.Warnings)
				}
				if st.Chains < 3 || st.Backend != backend {
					t.Errorf("stats %+v: want the backend and at least the entry chains", st)
				}
				t.Logf("%d frontends; %d chains listed in %v", len(chains.Frontends), st.Chains, st.Duration)
			})
		}
	}
}
