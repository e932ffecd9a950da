package ipvs

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseSave: any input either fails with an error or yields a table
// that Build accepts and that survives a FormatSave/ParseSave round trip.
func FuzzParseSave(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.save")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("-A -t [::1]:80 -s rr\n-a -t [::1]:80 -r [::2]:81 -m -w 0\n"))
	f.Add([]byte("-A -f 1 -6 -s rr -p\n"))
	// The corpus's ipvsadm captures (-Sn and -Ln).
	corpus, _ := filepath.Glob("../../testdata/captures/*/*ipvs*")
	for _, p := range corpus {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	if len(corpus) == 0 {
		f.Fatal("no corpus seeds under testdata/captures")
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseSave(data)
		if err != nil {
			return
		}
		Build(tab, kubeProxyOptions())
		out := FormatSave(tab)
		again, err := ParseSave(out)
		if err != nil {
			t.Fatalf("re-parse of %q failed: %v", out, err)
		}
		if got := FormatSave(again); string(got) != string(out) {
			t.Fatalf("round trip changed %q to %q", out, got)
		}
	})
}
