package reach

import (
	"sort"
	"strings"
)

// closeMatches returns up to n of names closest to want: those containing
// it (or contained in it), then those within an edit distance of a third of
// its length, nearest first.
func closeMatches(want string, names []string, n int) []string {
	type cand struct {
		name string
		d    int
	}
	limit := max(1, len(want)/3)
	var cs []cand
	for _, name := range names {
		d := distance(want, name)
		if strings.Contains(name, want) || strings.Contains(want, name) {
			d = min(d, 0)
		}
		if d <= limit {
			cs = append(cs, cand{name, d})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// distance is the Levenshtein distance between a and b (bytes).
func distance(a, b string) int {
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
