package nfevents

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// Observation is the model.Observed an event-fed reader publishes, and the
// bookkeeping of the model's incremental protocol (model.Observed: Version,
// Since, Changed), shared by the nftables and the iptables-nft readers.
//
// Such a reader keeps what it read and applies change events to it,
// changing the frontends of the observation it last returned in place (a
// copy of every frontend per change would make the cost of a change grow
// with the cluster). So:
//
//   - every content gets a new Version (NextVersion: one sequence for all
//     readers of the process, so a version never names two states);
//   - Since and Changed name every frontend that changed since the
//     observation the reader last returned (Returned), merged over the
//     observations published in between;
//   - Frozen gives a copy nothing changes, made at most once per version,
//     for whatever keeps an observation or hands it to another goroutine.
//
// The reader serialises Publish, Returned and Drop (its own lock); Frozen
// may be called from any goroutine at any time and waits only for a change
// of the observation itself, never for a kernel read. The zero value has
// nothing published.
type Observation struct {
	mu       sync.Mutex                       // held while obs or its frontends change; Frozen takes only it
	obs      model.Observed                   // the current observation; Version 0: none
	frozen   model.Observed                   // Frozen's copy of the latest version
	last     uint64                           // the Version published last (kept across Drop)
	acc      map[model.Frontend]bool          // frontends changed since accSince (nil: nothing counted)
	accSince uint64                           // the version acc relates to
	out      map[model.Frontend]model.Verdict // the frontends of the observation returned last
}

// versions is the source of every Version an Observation gives (it starts
// at the clock, so a restarted agent does not reuse a version).
var versions atomic.Uint64

// NextVersion returns a new observation version from the process's one
// sequence; a reader path without an Observation (a dump tool's read)
// versions its results with it too.
func NextVersion() uint64 {
	versions.CompareAndSwap(0, uint64(time.Now().UnixNano()))
	return versions.Add(1)
}

// Lock is held while the reader changes the current observation's
// frontends in place; PublishLocked then publishes the result before
// Unlock, so Frozen never copies a change under the old version.
func (o *Observation) Lock() { o.mu.Lock() }

// Unlock ends Lock.
func (o *Observation) Unlock() { o.mu.Unlock() }

// Publish makes obs the current observation with a new version (see
// PublishLocked) and returns it.
func (o *Observation) Publish(obs model.Observed, changed map[model.Frontend]bool) model.Observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.PublishLocked(obs, changed)
}

// PublishLocked is Publish with Lock held. changed, when not nil, names the
// only frontends that differ from the current observation (they were
// changed in place). When nil, obs is a new evaluation: it relates to the
// observation returned last only if frontends were changed in place since,
// by comparing that observation's frontends with obs's.
func (o *Observation) PublishLocked(obs model.Observed, changed map[model.Frontend]bool) model.Observed {
	obs.Since, obs.Changed = 0, nil
	switch {
	case changed != nil:
		if o.acc == nil {
			o.acc, o.accSince = map[model.Frontend]bool{}, o.last
		}
		for fe := range changed {
			o.acc[fe] = true
		}
		obs.Since, obs.Changed = o.accSince, o.acc
	case o.acc != nil && o.out != nil:
		// The frontends returned last were changed in place at acc; what
		// differs from them now is that, or differs between them and obs.
		acc := maps.Clone(o.acc)
		model.MarkDiffering(acc, o.out, obs.Frontends)
		o.acc = acc
		obs.Since, obs.Changed = o.accSince, acc
	}
	obs.Version = NextVersion()
	o.last = obs.Version
	o.obs = obs
	return obs
}

// Current is the current observation (Version 0: none). Only the reader
// calls it, under its own lock.
func (o *Observation) Current() model.Observed { return o.obs }

// Returned records that the reader's Snapshot returns obs: what changes
// from now on is named relative to it.
func (o *Observation) Returned(obs model.Observed) model.Observed {
	o.out, o.acc = obs.Frontends, nil
	return obs
}

// Drop forgets the current observation (the reader dropped what it keeps):
// Frozen has nothing until the next Publish. What was returned stays the
// base of Since, as its frontends are not changed any more.
func (o *Observation) Drop() {
	o.mu.Lock()
	o.obs = model.Observed{}
	o.mu.Unlock()
}

// Frozen returns a copy of the current observation that nothing changes,
// made at most once per version; false when there is none (an observation
// returned earlier is then not changed any more either).
func (o *Observation) Frozen() (model.Observed, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.obs.Version == 0 {
		return model.Observed{}, false
	}
	if o.frozen.Version != o.obs.Version {
		obs := o.obs
		obs.Frontends, obs.Since, obs.Changed = maps.Clone(obs.Frontends), 0, nil
		o.frozen = obs
	}
	return o.frozen, true
}
