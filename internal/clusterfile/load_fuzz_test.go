package clusterfile

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/netdrift/netdrift/internal/watch"
)

// FuzzLoadCluster: any input either loads or returns an error; never panics,
// and whatever loads can be fed to Expected. Seeds: testdata/fuzz/FuzzLoadCluster
// plus the documents of the loader tests.
func FuzzLoadCluster(f *testing.F) {
	for _, s := range loaderSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := Load(data, "fuzz")
		if err != nil {
			if cs != nil {
				t.Fatal("state returned with an error")
			}
			return
		}
		for _, n := range []string{"node-a", "worker-a", ""} {
			_ = watch.Expected(n, cs)
		}
	})
}

// loaderSeeds are the documents of the loader tests and the repository's
// cluster files (testdata/small.cluster.json, the capture corpus).
func loaderSeeds() [][]byte {
	seeds := [][]byte{[]byte(yamlList), []byte(multiDoc),
		[]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}]}`)}
	files, _ := filepath.Glob("../../testdata/captures/*/*cluster*")
	for _, p := range append([]string{"testdata/small.cluster.json"}, files...) {
		if data, err := os.ReadFile(p); err == nil {
			seeds = append(seeds, data)
		}
	}
	return seeds
}

// FuzzLoadFastMatchesStd: whatever the fast decoding loads, encoding/json
// loads too, to the same state (Load falls back to encoding/json on
// any error, so the fast decoding must never accept what it rejects).
func FuzzLoadFastMatchesStd(f *testing.F) {
	for _, s := range loaderSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, err := loadFast(data)
		if err != nil {
			return
		}
		std, err := load(data, "fuzz", stdDecoding)
		if err != nil {
			t.Fatalf("fast decoding loaded what encoding/json rejects: %v", err)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatal("fast decoding and encoding/json loaded different states")
		}
	})
}
