package nftables

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzNFTJSONFastMatchesStd: where the fast decoding (decodeNFTJSON's
// first try) accepts a document, encoding/json decodes it to the same
// objects; where it refuses one, decodeNFTJSON's answer is encoding/json's.
func FuzzNFTJSONFastMatchesStd(f *testing.F) {
	for _, data := range nftJSONSeeds(f) {
		f.Add(data)
	}
	f.Add([]byte(`{"nftables": [{"rule": {"family": "ip", "table": "kube-proxy", "chain": "c", "Expr": [{"DROP": null}]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		type doc struct {
			Nftables []nftJSONObject `json:"nftables"`
		}
		var fast, std doc
		fastErr, stdErr := unmarshalNFT(data, &fast), json.Unmarshal(data, &std)
		if fastErr == nil && stdErr != nil {
			t.Fatalf("fast decoding accepts what encoding/json refuses (%v)", stdErr)
		}
		if fastErr == nil && !reflect.DeepEqual(fast, std) {
			t.Fatalf("decoded differently:\nfast %+v\nstd  %+v", fast, std)
		}
	})
}

// TestNFTJSONVerdictStrict: a verdict is an object of exactly one member
// naming a verdict, in nft's own spelling, as when it was read as a map.
func TestNFTJSONVerdictStrict(t *testing.T) {
	for _, c := range []struct {
		in   string
		want nftVerdict
		ok   bool
	}{
		{`{"drop": null}`, nftVerdict{Kind: nftVerdictDrop}, true},
		{`{"goto": {"target": "endpoint-a"}}`, nftVerdict{Kind: nftVerdictGoto, Target: "endpoint-a"}, true},
		{`{"drop": null, "drop": null}`, nftVerdict{Kind: nftVerdictDrop}, true},
		{`{"drop": null, "x": 1}`, nftVerdict{}, false},
		{`{"drop": null, "accept": null}`, nftVerdict{}, false},
		{`{"DROP": null}`, nftVerdict{}, false},
		{`{"x": 1}`, nftVerdict{}, false},
		{`"drop"`, nftVerdict{}, false},
	} {
		v, ok, _ := parseNFTJSONVerdict([]byte(c.in))
		if ok != c.ok || v != c.want {
			t.Errorf("%s: got %+v ok=%v, want %+v ok=%v", c.in, v, ok, c.want, c.ok)
		}
	}
	if _, ok, err := parseNFTJSONVerdict([]byte(`{"jump": {"target": ""}}`)); ok || err == nil {
		t.Errorf("jump without target: ok=%v err=%v, want an error", ok, err)
	}
}
