package nftables

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
)

// nftJSONSeeds are the fuzzers' seed documents: the hand-written tables
// and a small generated one.
func nftJSONSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, name := range []string{"handwritten.v4.nft.json", "handwritten.v6.nft.json"} {
		data, err := os.ReadFile(fixture.Path(f, name))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	return append(seeds, nftGenSpec{services: 4, endpoints: 2, affinityEvery: 3, nodePortEvery: 2, emptyEvery: 3}.json())
}

// FuzzParseNFTJSON: any input yields a result or an error, never a panic;
// a result is internally consistent. Seeds: the hand-written tables (small
// enough for the mutator; the large fixtures are covered by golden tests), a
// small generated table and testdata/fuzz/FuzzParseNFTJSON.
func FuzzParseNFTJSON(f *testing.F) {
	for _, data := range nftJSONSeeds(f) {
		f.Add(data, []byte(nil))
	}
	f.Add([]byte(`{"nftables": []}`), []byte(`{"nftables": [{"table": {"family": "ip6", "name": "kube-proxy"}}]}`))
	// The corpus's small nft captures: `nft -j list ruleset` holding both
	// tables (given as both files, as capture.Observe does), one table, text.
	paths, _ := filepath.Glob("../../../testdata/captures/*/*")
	seeds := 0
	for _, p := range paths {
		name := filepath.Base(p)
		if st, err := os.Stat(p); err != nil || st.Size() > 64<<10 || !(strings.HasSuffix(name, ".nft.json") || strings.HasSuffix(name, ".nft.txt")) {
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, b)
			seeds++
		}
	}
	if seeds == 0 {
		f.Fatal("no corpus seeds under testdata/captures")
	}
	f.Fuzz(func(t *testing.T, v4, v6 []byte) {
		obs, err := ParseJSON(v4, v6, model.Hints{})
		if err != nil {
			return
		}
		for fe, v := range obs.Frontends {
			if v.Action != "forward" && len(v.Backends) != 0 {
				t.Fatalf("%s: %s with backends", fe, v.Action)
			}
			for i := 1; i < len(v.Backends); i++ {
				if !nftAddrPortLess(v.Backends[i-1], v.Backends[i]) {
					t.Fatalf("%s: backends not sorted and unique: %v", fe, v.Backends)
				}
			}
		}
	})
}
