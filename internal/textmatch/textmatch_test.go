package textmatch

import (
	"slices"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"node-1", "node-1", 0}, {"node-1", "node-2", 1}, {"kitten", "sitting", 3}, {"", "abc", 3}, {"worker-a", "wroker-a", 2}} {
		if got := Distance(c.a, c.b); got != c.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"worker-a", "worker-b", "control-plane", "worker-a-2", "gpu-7"}
	if got := Closest("worker-c", names, 3); !slices.Equal(got, []string{"worker-a", "worker-b", "worker-a-2"}) {
		t.Errorf("worker-c: %q", got)
	}
	// Containment first, then distance; at most n.
	if got := Closest("worker-a", names, 2); !slices.Equal(got, []string{"worker-a", "worker-a-2"}) {
		t.Errorf("worker-a: %q", got)
	}
	if got := Closest("zzz", names, 3); len(got) != 0 {
		t.Errorf("zzz: %q, want nothing close", got)
	}
}
