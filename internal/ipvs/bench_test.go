package ipvs

import (
	"fmt"
	"strings"
	"testing"
)

// bigSave renders n virtual servers with 10 real servers each (kube-proxy
// scale: 10,000 services / 100,000 endpoints at n=10000).
func bigSave(n int) []byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		vip := fmt.Sprintf("10.97.%d.%d:80", i/250, i%250+1)
		fmt.Fprintf(&b, "-A -t %s -s rr\n", vip)
		for j := 0; j < 10; j++ {
			fmt.Fprintf(&b, "-a -t %s -r 10.214.%d.%d:8080 -m -w %d\n", vip, i%200, j+1, j%5)
		}
	}
	return []byte(b.String())
}

func BenchmarkParseSave10k(b *testing.B) {
	data := bigSave(10000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseSave(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuild10k(b *testing.B) {
	tab, err := ParseSave(bigSave(10000))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if obs := Build(tab, Options{}); len(obs.Frontends) != 10000 {
			b.Fatalf("%d frontends", len(obs.Frontends))
		}
	}
}
