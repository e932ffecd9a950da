// Package textmatch suggests the names closest to one a user typed (a node
// name that is not in the cluster, say): "did you mean ...".
package textmatch

import (
	"cmp"
	"slices"
	"strings"
)

// Closest returns up to n of names closest to want, nearest first (ties by
// name): a name containing want, or contained in it, counts as distance 0;
// otherwise the Levenshtein distance by bytes, kept when at most a third of
// the longer name (at least 2). Node names are DNS labels: bytes are
// characters.
func Closest(want string, names []string, n int) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, c := range names {
		d := Distance(want, c)
		if strings.Contains(c, want) || strings.Contains(want, c) {
			d = 0
		}
		if d <= max(2, max(len(c), len(want))/3) {
			cs = append(cs, cand{c, d})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.name, b.name))
	})
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// Distance is the Levenshtein distance between a and b, by bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
