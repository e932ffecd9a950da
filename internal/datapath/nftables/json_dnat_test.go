package nftables

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
)

// dnatMapSeeds: the form nft -j prints kube-proxy's endpoint selection in,
// variations the scan reads, and forms it leaves to the decoding.
var dnatMapSeeds = []string{
	`{"map": {"key": {"numgen": {"mode": "random", "mod": 2, "offset": 0}}, "data": {"set": [[0, {"concat": ["10.128.0.1", 8080]}], [1, {"concat": ["10.128.0.2", 8080]}]]}}}`,
	"{\n \"map\":{\"data\":{\"set\":[[0,{\"concat\":[\"fd00::1\",53]}]]},\"key\":{\"numgen\":{\"mode\":\"random\",\"mod\":1,\"offset\":0}}}}",
	`{"map": {"key": {"numgen": {"mode": "random", "mod": 0, "offset": 0}}, "data": {"set": []}}}`,
	`{"map": {"key": "x", "data": {"set": [["a\"]b", {"concat": ["10.0.0.1", 1]}]]}}}`,
	`{"map": {"data": {"set": [[0, {"concat": ["10.0.0.1", "80"]}]]}}}`,
	`{"map": {"data": {"set": [[0, {"concat": ["10.0.0.\u0031", 80]}]]}}}`,
	`{"Map": {"data": {"set": [[0, {"concat": ["10.0.0.1", 80]}]]}}}`,
	`{"map": {"data": {"set": [[0, {"concat": ["10.0.0.1", 80]}]]}, "data": {"set": []}}}`,
	`{"map": {"data": {"set": [[0, {"concat": ["10.0.0.1", 80, 1]}]]}}}`,
	`{"map": {"data": {"set": [[0, {"concat": ["10.0.0.1", 70000]}]]}}}`,
	`{"map": {"data": {"set": [[0, {"concat": ["not-an-ip", 80]}]]}}}`,
	`{"map": {"data": {"set": [[0, {"concat": ["10.0.0.1", 8.0]}]]}}}`,
	`{"map": {"data": {"set": null}}}`,
	`"10.0.0.1"`,
	`null`,
}

func TestScanDNATMap(t *testing.T) {
	for i, want := range []struct {
		ok      bool
		targets []string
	}{
		{true, []string{"10.128.0.1:8080", "10.128.0.2:8080"}},
		{true, []string{"[fd00::1]:53"}},
		{true, nil},
		{true, []string{"10.0.0.1:1"}}, // a key holding an escaped quote and a bracket
		{false, nil},                   // a port as a string: the decoding reads it
		{false, nil},                   // an escape in the address
		{false, nil},                   // another letter case
		{false, nil},                   // a repeated member
		{false, nil},                   // three parts
		{false, nil},                   // a port out of range
		{false, nil},                   // not an address
		{false, nil},                   // not an integer
		{false, nil},                   // no set
		{false, nil},                   // a plain address
		{false, nil},
	} {
		got, ok := scanDNATMap([]byte(dnatMapSeeds[i]))
		var s []string
		for _, ap := range got {
			s = append(s, ap.String())
		}
		if ok != want.ok || !slices.Equal(s, want.targets) {
			t.Errorf("%s: got %v %v, want %v %v", dnatMapSeeds[i], s, ok, want.targets, want.ok)
		}
	}
}

// FuzzScanDNATMapMatchesDecoding: whatever the scan reads, the decoding it
// replaces reads the same.
func FuzzScanDNATMapMatchesDecoding(f *testing.F) {
	for _, s := range dnatMapSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !json.Valid([]byte(v)) {
			return
		}
		got, ok := scanDNATMap([]byte(v))
		if !ok {
			return
		}
		var r nftRule
		if err := r.addJSONDNATValue(json.RawMessage(v), nil); err != nil {
			t.Fatalf("%s: the scan read %v, the decoding fails: %v", v, got, err)
		}
		if !slices.Equal(got, r.DNAT) && !(len(got) == 0 && len(r.DNAT) == 0) {
			t.Fatalf("%s: the scan read %v, the decoding %v", v, got, r.DNAT)
		}
	})
}

// TestDNATAddrDecodesAsBefore: a rule's dnat decodes to the same targets
// through both decodings of a document (encoding/json/v2 and encoding/json),
// scanned or not.
func TestDNATAddrDecodesAsBefore(t *testing.T) {
	decoded := 0
	for _, s := range dnatMapSeeds {
		doc := `{"dnat": {"addr": ` + s + `, "port": 80}}`
		var v2, std nftJSONStmt
		errV2 := unmarshalNFT([]byte(doc), &v2)
		errStd := json.Unmarshal([]byte(doc), &std)
		if errV2 != nil || errStd != nil {
			t.Fatalf("%s: %v / %v", doc, errV2, errStd)
		}
		var a, b nftRule
		ea, eb := a.addJSONStatement(&v2), b.addJSONStatement(&std)
		if (ea == nil) != (eb == nil) || !slices.Equal(a.DNAT, b.DNAT) {
			t.Errorf("%s: v2 %v %v, encoding/json %v %v", doc, a.DNAT, ea, b.DNAT, eb)
		}
		if len(a.DNAT) > 0 {
			decoded++
		}
	}
	if want := netip.MustParseAddrPort("10.0.0.1:80"); decoded < 5 {
		t.Errorf("only %d seeds decoded to targets (the plain address should give %s)", decoded, want)
	}
}
