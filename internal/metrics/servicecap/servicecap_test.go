package servicecap

import (
	"reflect"
	"sync"
	"testing"
)

// TestCapAdmitsFirstSeenForGood: the first services seen (by name within
// one call) get their series, later ones are summed under Other, and an
// admitted service keeps its series whatever comes after.
func TestCapAdmitsFirstSeenForGood(t *testing.T) {
	c := New(2)
	got := Sum(c, map[Key]uint64{{Namespace: "ns", Name: "d"}: 4, {Namespace: "ns", Name: "b"}: 2, {Namespace: "ns", Name: "c"}: 3, {Namespace: "ns", Name: "a"}: 1})
	want := map[Key]uint64{{Namespace: "ns", Name: "a"}: 1, {Namespace: "ns", Name: "b"}: 2, OtherKey: 7}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("first call: %v, want %v", got, want)
	}
	if k := c.Label(Key{Namespace: "ns", Name: "e"}); k != OtherKey {
		t.Fatalf("a fifth service past the cap of 2: series %v, want %v", k, OtherKey)
	}
	if k := New(1).Label(Key{Namespace: "ns", Name: "e"}); k != (Key{Namespace: "ns", Name: "e"}) {
		t.Fatalf("a service with room: series %v, want its own", k)
	}
	got = Sum(c, map[Key]uint64{{Namespace: "aa", Name: "z"}: 5, {Namespace: "ns", Name: "b"}: 9})
	want = map[Key]uint64{{Namespace: "ns", Name: "b"}: 9, OtherKey: 5}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("a service sorting first but seen later: %v, want %v", got, want)
	}
}

// TestCapDefaultAndConcurrent: max <= 0 is DefaultMax; concurrent callers
// never admit more than the cap.
func TestCapDefaultAndConcurrent(t *testing.T) {
	if c := New(0); c.max != DefaultMax {
		t.Fatalf("New(0) caps at %d, want %d", c.max, DefaultMax)
	}
	c := New(10)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := map[Key]int{}
			for j := range 20 {
				m[Key{Namespace: "ns", Name: string(rune('a'+i)) + string(rune('a'+j))}] = 1
			}
			Sum(c, m)
		}()
	}
	wg.Wait()
	if n := len(c.admitted); n != 10 {
		t.Fatalf("%d services admitted, want the cap 10", n)
	}
}
