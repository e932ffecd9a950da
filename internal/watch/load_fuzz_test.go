package watch

import (
	"os"
	"testing"
)

// FuzzLoadCluster: any input either loads or returns an error; never panics,
// and whatever loads can be fed to Expected. Seeds: testdata/fuzz/FuzzLoadCluster
// plus the documents of the loader tests.
func FuzzLoadCluster(f *testing.F) {
	f.Add([]byte(yamlList))
	f.Add([]byte(multiDoc))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}]}`))
	if data, err := os.ReadFile("testdata/small.cluster.json"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := LoadCluster(data, "fuzz")
		if err != nil {
			if cs != nil {
				t.Fatal("state returned with an error")
			}
			return
		}
		for _, n := range []string{"node-a", "worker-a", ""} {
			_ = Expected(n, cs)
		}
	})
}
