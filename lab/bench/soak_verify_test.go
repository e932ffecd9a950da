package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// TestRuleIndexes: the soak's check of findings reads kube-proxy's rules
// as the reference tools print them (the project's captures of kube-proxy's
// formats: an iptables large-cluster dump without comments, and the
// nftables table with affinity sets and a vmap).
func TestRuleIndexes(t *testing.T) {
	read := func(rel string) []byte {
		b, err := os.ReadFile(filepath.Join(labenv.ModuleDir(), "..", "internal", "datapath", rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		mode, file, frontend string
		in, out              []string
	}{
		{"iptables-nft", "iptables/testdata/large-cluster.iptables-save", "10.96.20.1:80",
			[]string{"10.244.1.1:8080", "10.244.1.2:8080", "10.244.2.3:8080"}, []string{"10.244.1.3:8080", "10.244.1.1:80"}},
		{"nftables", "nftables/testdata/handwritten.v4.nft", "10.96.0.10:80",
			[]string{"10.1.0.5:8080", "10.1.1.6:8080"}, []string{"10.1.0.6:8080", "10.1.0.5:80"}},
	} {
		dump := read(tc.file)
		var idx ruleIndex = indexNFT(dump)
		if tc.mode != "nftables" {
			var listed []string
			x, err := readIPTChains([]soakFinding{{Frontend: tc.frontend, Protocol: "TCP"}}, func(chain string) ([]byte, error) {
				listed = append(listed, chain)
				return chainLines(dump, chain), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// KUBE-SERVICES, the service's chain, its three endpoints' chains.
			if len(listed) != 5 {
				t.Errorf("%s: listed %d chains %v, want the 5 the frontend leads to", tc.file, len(listed), listed)
			}
			idx = x
		}
		for _, b := range tc.in {
			if !idx.holds(tc.frontend, "TCP", b) {
				t.Errorf("%s: %s should forward to %s", tc.file, tc.frontend, b)
			}
			if idx.holds(tc.frontend, "UDP", b) {
				t.Errorf("%s: %s/UDP forwards to %s", tc.file, tc.frontend, b)
			}
		}
		for _, b := range tc.out {
			if idx.holds(tc.frontend, "TCP", b) {
				t.Errorf("%s: %s does not forward to %s", tc.file, tc.frontend, b)
			}
		}
		if idx.holds("10.96.255.255:80", "TCP", tc.in[0]) {
			t.Errorf("%s: an unknown frontend forwards", tc.file)
		}
	}
}

// TestSoakViewAsOf: an answer is as of its request, or of the first commit
// its view said it had not read.
func TestSoakViewAsOf(t *testing.T) {
	asked := time.Date(2026, 12, 6, 3, 0, 10, 0, time.UTC)
	if got := (soakView{Current: true}).asOf(asked); !got.Equal(asked) {
		t.Errorf("up to date: as of %v", got)
	}
	behind := asked.Add(-3 * time.Second)
	if got := (soakView{Current: true, BehindCommits: 2, BehindSince: behind}).asOf(asked); !got.Before(behind) || got.Before(behind.Add(-time.Second)) {
		t.Errorf("3 s behind: as of %v, want just before %v", got, behind)
	}
}

// chainLines is what `iptables -t nat -S chain` prints of a dump's chain.
func chainLines(dump []byte, chain string) []byte {
	out := "-N " + chain + "\n"
	for _, l := range strings.Split(string(dump), "\n") {
		if strings.HasPrefix(l, "-A "+chain+" ") {
			out += l + "\n"
		}
	}
	return []byte(out)
}
