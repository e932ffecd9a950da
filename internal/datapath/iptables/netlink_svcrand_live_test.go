//go:build linux

package iptables_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
)

// Services come and go, lose and regain their endpoints, in kube-proxy
// syncs (KUBE-SERVICES reordered, chains of services gone flushed and
// deleted); the agent's side of the reader is played in random order
// between them: events applied late or without their rule messages,
// Snapshots taken while events wait, hints changed as the watch would.
// Each Snapshot must keep the incremental protocol the comparer relies on
// (a frontend not named in Changed is as the previous Snapshot returned
// it), and once every event is applied the reader must equal a fresh read.

var randSpec = bench.Spec{Services: 10, Endpoints: 2, NodePortEvery: 3}

// svcState is which of randSpec's services exist, and which have endpoints.
type svcState struct {
	present, ep []bool
}

func fullState() svcState {
	s := svcState{present: make([]bool, randSpec.Services), ep: make([]bool, randSpec.Services)}
	for i := range s.present {
		s.present[i], s.ep[i] = true, true
	}
	return s
}

func (s svcState) clone() svcState {
	return svcState{present: append([]bool(nil), s.present...), ep: append([]bool(nil), s.ep...)}
}

// syncFrom is kube-proxy's sync from prev to s: services whose endpoints
// went lose their chains, services present without endpoints get reject
// rules.
func (s svcState) syncFrom(prev svcState, seed uint64) string {
	all := randSpec.List()
	var sync svcSync
	if seed%2 == 0 {
		sync.kubeOrder = all
	}
	for i, v := range all {
		had, has, rejects := prev.ep[i], s.present[i] && s.ep[i], s.present[i] && !s.ep[i]
		switch {
		case has:
		case had && rejects:
			sync.empty = append(sync.empty, v)
		case had:
			sync.gone = append(sync.gone, v)
		case rejects:
			sync.fresh = append(sync.fresh, v)
		default:
			sync.prior = append(sync.prior, v)
		}
	}
	sync.seed = seed
	return sync.text(randSpec.IPTablesRestore())
}

// mutate changes one or two services at random.
func (s svcState) mutate(rng *rand.Rand) svcState {
	n := s.clone()
	for range 1 + rng.IntN(2) {
		i := rng.IntN(len(n.present))
		switch {
		case !n.present[i]:
			n.present[i], n.ep[i] = true, rng.IntN(2) == 0
		case rng.IntN(3) == 0:
			n.ep[i] = !n.ep[i]
		default:
			n.present[i] = false
		}
	}
	return n
}

// hints are the agent's: the services present.
func (s svcState) hints() model.Hints {
	var gone []bench.Service
	for i, v := range randSpec.List() {
		if !s.present[i] {
			gone = append(gone, v)
		}
	}
	return hintsWithout(randSpec, gone)
}

// protocol is what the comparer keeps of the last Snapshot.
type protocol struct {
	version uint64
	fronts  map[model.Frontend]model.Verdict
}

// check: the same version has the same frontends; a Snapshot naming its
// changes since the last one changed no other frontend.
func (p *protocol) check(t *testing.T, what string, obs model.Observed) {
	t.Helper()
	switch {
	case p.fronts == nil:
	case obs.Version == p.version:
		if !sameFronts(obs.Frontends, p.fronts, nil) {
			t.Errorf("%s: version %d returned again with other frontends", what, obs.Version)
		}
	case obs.Changed != nil && obs.Since == p.version:
		if !sameFronts(obs.Frontends, p.fronts, obs.Changed) {
			t.Errorf("%s: a frontend changed since version %d and is not named in Changed %v:\nbefore %v\nnow    %v",
				what, p.version, obs.Changed, p.fronts, obs.Frontends)
		}
	}
	p.version, p.fronts = obs.Version, maps.Clone(obs.Frontends)
}

// sameFronts compares a and b on the frontends not in skip.
func sameFronts(a, b map[model.Frontend]model.Verdict, skip map[model.Frontend]bool) bool {
	for _, m := range []map[model.Frontend]model.Verdict{a, b} {
		for f := range m {
			va, oka := a[f]
			vb, okb := b[f]
			if !skip[f] && (oka != okb || !va.Equal(vb)) {
				return false
			}
		}
	}
	return true
}

// applySome hands the reader the events waiting, up to max of them (all:
// until the kernel's generation), some without their rule messages.
func (r *opsRig) applySome(rng *rand.Rand, all bool) {
	r.t.Helper()
	gen, err := nfevents.Generation(r.ns)
	if err != nil {
		r.t.Fatal(err)
	}
	max := 1 + rng.IntN(3)
	timeout := time.After(10 * time.Second)
	for n := 0; all || n < max; n++ {
		var ev nfevents.Event
		select {
		case ev = <-r.w.Events():
		case <-timeout:
			r.t.Fatalf("no event for generation %d", gen)
		default:
			if !all {
				return
			}
			select {
			case ev = <-r.w.Events():
			case <-timeout:
				r.t.Fatalf("no event for generation %d", gen)
			}
		}
		if rng.IntN(4) == 0 {
			ev.Ops, ev.OpsComplete = nil, false
		}
		evGen := ev.Generation
		if err := r.applyOne(ev); err != nil {
			r.t.Fatal(err)
		}
		if int32(evGen-gen) >= 0 {
			return
		}
	}
}

// applyOne hands an event to the reader under test: the iptables mode
// (which releases the event's memory to the watcher) or the netlink reader.
func (r *opsRig) applyOne(ev nfevents.Event) error {
	if r.mode != nil {
		return r.mode.ApplyChange(context.Background(), ev)
	}
	return r.nr.ApplyEvent(context.Background(), ev)
}

// snapshotUnder is the reader under test's Snapshot with the rig's hints.
func (r *opsRig) snapshotUnder() (model.Observed, error) {
	if r.mode != nil {
		r.mode.SetHints(r.hints)
		return r.mode.Snapshot(context.Background())
	}
	return r.nr.Snapshot(context.Background(), r.hints)
}

// TestNFTServicesComeAndGoRandom plays random syncs and agent steps, on
// the netlink reader and on the iptables mode the agent uses (which hands
// each event's memory back to the watcher for the next one).
func TestNFTServicesComeAndGoRandom(t *testing.T) {
	for _, viaMode := range []bool{false, true} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("mode %v seed %d", viaMode, seed), func(t *testing.T) {
				comeAndGo(t, seed, viaMode)
			})
		}
	}
}

func comeAndGo(t *testing.T, seed uint64, viaMode bool) {
	rng := rand.New(rand.NewPCG(seed, 7))
	r := newOpsRigWith(t, randSpec)
	if viaMode {
		r.mode = iptables.OpenMode(r.ns)
	}
	var p protocol
	state := fullState()
	snapshot := func(what string) model.Observed {
		t.Helper()
		obs, err := r.snapshotUnder()
		if err != nil {
			t.Fatal(err)
		}
		p.check(t, what, obs)
		return obs
	}
	snapshot("start")
	for step := range 60 {
		what := fmt.Sprintf("step %d", step)
		switch rng.IntN(5) {
		case 0, 1:
			next := state.mutate(rng)
			r.restore(next.syncFrom(state, rng.Uint64()))
			state = next
		case 2:
			r.applySome(rng, false)
		case 3:
			r.hints = state.hints()
		}
		snapshot(what)
	}
	r.applySome(rng, true)
	got := snapshot("all applied")
	if r.mode == nil {
		r.sameAsFresh("all applied")
		return
	}
	fresh := &iptables.NFTReader{NetNS: r.ns, IPv6: true}
	want, err := fresh.Snapshot(context.Background(), r.hints)
	if err != nil {
		t.Fatal(err)
	}
	if !sameFronts(got.Frontends, want.Frontends, nil) {
		t.Errorf("all applied: the iptables mode's state differs from a fresh read:\ngot  %v\nwant %v", got.Frontends, want.Frontends)
	}
}
