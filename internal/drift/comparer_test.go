package drift

import (
	"fmt"
	"maps"
	"math/rand"
	"net/netip"
	"reflect"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

// randomVerdict is a random verdict of frontend fe's service port: reject,
// drop or forward to one to three of four backends, so that random states
// over a few frontends share most verdicts and updates touch a few of them.
func randomVerdict(r *rand.Rand, fe int) model.Verdict {
	sp := model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns", Name: fmt.Sprintf("svc%d", fe)}, Protocol: model.TCP}
	switch r.Intn(5) {
	case 0:
		return model.Verdict{Service: sp, Action: model.Reject}
	case 1:
		return model.Verdict{Service: sp, Action: model.Drop}
	}
	var bs []netip.AddrPort
	for i := 0; i < 1+r.Intn(3); i++ {
		bs = append(bs, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(fe), byte(r.Intn(4))}), 80))
	}
	return model.Verdict{Service: sp, Action: model.Forward, Backends: model.SortBackends(bs)}
}

func frontend(i int) model.Frontend {
	return model.NewFrontend(netip.AddrFrom4([4]byte{10, 96, 0, byte(i)}), 80, model.TCP, model.ClusterIP)
}

func mutate(r *rand.Rand, m map[model.Frontend]model.Verdict, changed map[model.Frontend]bool) map[model.Frontend]model.Verdict {
	out := make(map[model.Frontend]model.Verdict, len(m))
	for k, v := range m {
		out[k] = v
	}
	for n := r.Intn(3); n >= 0; n-- {
		i := r.Intn(12)
		fe := frontend(i)
		if changed != nil {
			changed[fe] = true
		}
		if r.Intn(4) == 0 {
			delete(out, fe)
		} else {
			out[fe] = randomVerdict(r, i)
		}
	}
	return out
}

// TestComparerEqualsCompare: after any sequence of desired and observed
// changes, the incremental result is Compare's, and an update that changes
// nothing compares nothing.
func TestComparerEqualsCompare(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	c := NewComparer()
	desired, observed := map[model.Frontend]model.Verdict{}, map[model.Frontend]model.Verdict{}
	version := uint64(1)
	for step := 0; step < 2000; step++ {
		changed := map[model.Frontend]bool{}
		switch r.Intn(3) {
		case 0:
			desired = mutate(r, desired, changed)
		case 1:
			observed = mutate(r, observed, nil)
			version++
		}
		d := model.Desired{Frontends: desired}
		o := model.Observed{Datapath: model.ModeNFTables, Frontends: observed, Version: version}
		got := c.Update(d, o, Changes{Desired: changed})
		want := Compare(d, o)
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: incremental\n%v\nfull\n%v", step, got, want)
		}
	}
	d := model.Desired{Frontends: desired}
	o := model.Observed{Datapath: model.ModeNFTables, Frontends: observed, Version: version}
	c.Update(d, o, Changes{})
	if c.Compared != 0 {
		t.Fatalf("an unchanged state compared %d frontends", c.Compared)
	}
	c.Update(d, model.Observed{Datapath: model.ModeNFTables, Frontends: maps.Clone(observed)}, Changes{})
	if c.Compared != 0 {
		t.Fatalf("an unversioned but identical observed state compared %d frontends (the diff pass must find no change)", c.Compared)
	}
	// A reader's cache, changed in place and naming nothing: a diff against
	// the last observation cannot see the change, so every frontend is
	// compared again, and the change is found.
	shared := maps.Clone(observed)
	c.Update(d, model.Observed{Datapath: model.ModeNFTables, Frontends: shared, Version: version + 1}, Changes{})
	fe := model.SortedFrontends(shared)[0]
	delete(shared, fe)
	got := c.Update(d, model.Observed{Datapath: model.ModeNFTables, Frontends: shared, Version: version + 2}, Changes{ObservedInPlace: true})
	if c.Compared < len(observed)-1 {
		t.Fatalf("a shared map changed in place compared %d frontends, want every one (%d observed)", c.Compared, len(observed)-1)
	}
	if want := Compare(d, model.Observed{Datapath: model.ModeNFTables, Frontends: shared}); !reflect.DeepEqual(got, want) {
		t.Fatalf("shared map changed in place: incremental\n%v\nfull\n%v", got, want)
	}
	// The reader names what changed in place since the last version: only
	// those are compared.
	shared[fe] = observed[fe]
	c.Update(d, model.Observed{Datapath: model.ModeNFTables, Frontends: shared, Version: version + 3,
		Since: version + 2, Changed: map[model.Frontend]bool{fe: true}}, Changes{ObservedInPlace: true})
	if c.Compared != 1 {
		t.Fatalf("a shared map naming one change compared %d frontends, want 1", c.Compared)
	}
}

// TestComparerDesiredInPlace: the agent updates one desired map in place and
// names what changed; the result is still Compare's, whether the observed
// state names its changes or is a new unversioned map that must be diffed.
func TestComparerDesiredInPlace(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	c := NewComparer()
	desired, observed := map[model.Frontend]model.Verdict{}, map[model.Frontend]model.Verdict{}
	for step := 0; step < 2000; step++ {
		changed := map[model.Frontend]bool{}
		if r.Intn(2) == 0 {
			for fe, v := range mutate(r, desired, changed) {
				desired[fe] = v
			}
			for fe := range changed {
				if v, ok := mutate(r, desired, nil)[fe]; ok && r.Intn(3) == 0 {
					desired[fe] = v
				} else if r.Intn(3) == 0 {
					delete(desired, fe)
				}
			}
		} else {
			observed = mutate(r, observed, nil)
		}
		d := model.Desired{Frontends: desired}
		o := model.Observed{Datapath: model.ModeNFTables, Frontends: observed} // unversioned: diffed
		got, want := c.Update(d, o, Changes{Desired: changed}), Compare(d, o)
		if (len(got) > 0 || len(want) > 0) && !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: incremental\n%v\nfull\n%v", step, got, want)
		}
	}
}

// TestComparerFindingLeftOnlyInItself: a stale frontend (observed, not
// desired) leaves the observation the comparer holds in place, and the next
// observation is a new map naming no changes (a full walk, or a read by a
// fallback path). The frontend is then in neither desired map nor either
// observed map: only its finding holds it. Comparing every frontend, after
// an in-place change or in a full audit, must compare it too and drop the
// finding, as Compare does.
func TestComparerFindingLeftOnlyInItself(t *testing.T) {
	sp := model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "gone"}, Port: "http", Protocol: model.TCP}
	gone := model.NewFrontend(netip.MustParseAddr("10.96.0.11"), 80, model.TCP, model.ClusterIP)
	for _, ch := range []Changes{{ObservedInPlace: true}, {Full: true}} {
		c := NewComparer()
		d := model.Desired{Frontends: map[model.Frontend]model.Verdict{}}
		shared := map[model.Frontend]model.Verdict{gone: {Service: sp, Action: model.Reject}}
		got := c.Update(d, model.Observed{Datapath: model.ModeIPTables, Frontends: shared, Version: 1}, Changes{})
		if len(got) != 1 || got[0].Kind != model.StaleFrontend {
			t.Fatalf("want one stale_frontend first (the test's premise), got %v", got)
		}
		delete(shared, gone) // changed in place: the reader removed it
		fresh := model.Observed{Datapath: model.ModeIPTables, Frontends: map[model.Frontend]model.Verdict{}, Version: 2}
		got = c.Update(d, fresh, ch)
		if want := Compare(d, fresh); len(got) != 0 || len(want) != 0 {
			t.Errorf("%+v: findings %v after the frontend left every map, want Compare's %v", ch, got, want)
		}
	}
}
