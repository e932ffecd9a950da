package nfevents

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

func fe(last byte) model.Frontend {
	return model.NewFrontend(netip.AddrFrom4([4]byte{10, 96, 0, last}), 80, model.TCP, model.ClusterIP)
}

func verdict(backend string) model.Verdict {
	return model.Verdict{Action: "forward", Backends: []netip.AddrPort{netip.MustParseAddrPort(backend)}}
}

// TestObservationProtocol: versions are new per publish, Since/Changed
// name what changed in place since the observation last returned (merged
// over publishes nobody returned), a new evaluation after in-place changes
// is related by comparison, and Frozen copies once per version.
func TestObservationProtocol(t *testing.T) {
	var o Observation
	if _, ok := o.Frozen(); ok {
		t.Fatal("Frozen of an empty Observation: want none")
	}
	a, b, c := fe(1), fe(2), fe(3)
	first := o.Publish(model.Observed{Frontends: map[model.Frontend]model.Verdict{a: verdict("10.1.0.1:80"), b: verdict("10.1.0.2:80")}}, nil)
	if first.Version == 0 || first.Changed != nil {
		t.Fatalf("first publish: version %d, changed %v", first.Version, first.Changed)
	}
	out := o.Returned(first)

	// Two in-place changes, the first not returned: both are named, since
	// the returned version.
	o.Lock()
	out.Frontends[a] = verdict("10.1.0.9:80")
	v2 := o.PublishLocked(out, map[model.Frontend]bool{a: true})
	o.Unlock()
	o.Lock()
	out.Frontends[c] = verdict("10.1.0.3:80")
	v3 := o.PublishLocked(out, map[model.Frontend]bool{c: true})
	o.Unlock()
	if v2.Version <= first.Version || v3.Version <= v2.Version {
		t.Errorf("versions %d, %d, %d: want increasing", first.Version, v2.Version, v3.Version)
	}
	if v3.Since != first.Version || len(v3.Changed) != 2 || !v3.Changed[a] || !v3.Changed[c] {
		t.Errorf("since %d changed %v; want since %d, {a, c}", v3.Since, v3.Changed, first.Version)
	}

	// Frozen: a copy, made once per version, not changed by what follows.
	fz, ok := o.Frozen()
	if !ok || fz.Version != v3.Version || fz.Changed != nil {
		t.Fatalf("Frozen: ok %v version %d changed %v", ok, fz.Version, fz.Changed)
	}
	out.Frontends[b] = verdict("10.1.0.8:80") // in place, not yet published
	if got := fz.Frontends[b].Backends; len(got) != 1 || got[0] != netip.MustParseAddrPort("10.1.0.2:80") {
		t.Errorf("Frozen copy changed with the reader's map: %v", fz.Frontends[b])
	}

	// A new evaluation after in-place changes: related to the returned
	// observation by comparison (b differs), plus what changed in place.
	fresh := map[model.Frontend]model.Verdict{a: verdict("10.1.0.9:80"), b: verdict("10.1.0.2:80"), c: verdict("10.1.0.3:80")}
	v4 := o.Publish(model.Observed{Frontends: fresh}, nil)
	if v4.Since != first.Version || !v4.Changed[a] || !v4.Changed[b] || !v4.Changed[c] {
		t.Errorf("new evaluation: since %d changed %v; want since %d, {a, b, c}", v4.Since, v4.Changed, first.Version)
	}

	// Returned resets the count; a new evaluation with no in-place change
	// since says nothing about the difference (the caller compares).
	o.Returned(v4)
	v5 := o.Publish(model.Observed{Frontends: fresh}, nil)
	if v5.Changed != nil || v5.Since != 0 {
		t.Errorf("evaluation right after a return: since %d changed %v, want none", v5.Since, v5.Changed)
	}

	o.Drop()
	if _, ok := o.Frozen(); ok || o.Current().Version != 0 {
		t.Error("after Drop: want nothing published")
	}
	if v := NextVersion(); v <= v5.Version {
		t.Errorf("NextVersion %d after %d: one sequence must not go back", v, v5.Version)
	}
}

// TestBehindWaitsUpToTheLimit: the wait starts at the first Await, lasts
// the limit, and Clear starts it afresh.
func TestBehindWaitsUpToTheLimit(t *testing.T) {
	var b Behind
	if !b.Await(50 * time.Millisecond) {
		t.Fatal("first Await: want to wait")
	}
	time.Sleep(60 * time.Millisecond)
	if b.Await(50 * time.Millisecond) {
		t.Error("past the limit: want no more waiting")
	}
	if !b.Await(time.Hour) {
		t.Error("a longer limit from the same start: want to wait")
	}
	b.Clear()
	if !b.Await(50 * time.Millisecond) {
		t.Error("after Clear: want a new wait")
	}
	var d Behind
	if !d.Await(0) {
		t.Error("default limit: want to wait at first")
	}
}
