package drift

import (
	"reflect"

	"github.com/netdrift/netdrift/internal/model"
)

// Comparer is Compare kept up to date incrementally: it holds the findings
// per frontend and, on each Update, compares again only the frontends whose
// desired or observed verdict changed. The result equals Compare's.
type Comparer struct {
	desired    map[model.Frontend]model.Verdict
	observed   map[model.Frontend]model.Verdict
	obsVersion uint64
	mode       string
	found      map[model.Frontend][]model.Keyed[model.Finding] // keyed by Finding.Key, built once
	sorted     []model.Finding                                 // nil: rebuild from found
	// Compared counts the frontends compared by the last Update (for tests
	// and the debug log): the work the update did.
	Compared int
}

// NewComparer starts with nothing compared.
func NewComparer() *Comparer {
	return &Comparer{found: map[model.Frontend][]model.Keyed[model.Finding]{}}
}

// Update returns the findings for desired and observed. desiredChanged names
// the frontends whose desired verdict may have changed since the last Update;
// full compares every frontend again (the slow full audit, the safety net
// for anything the incremental path missed); an observed state with the same
// non-zero Version as the last one is taken as unchanged. desired may be the
// same map as last time, updated in place: desiredChanged then names every
// frontend that changed in it (a diff of the map against itself finds none).
func (c *Comparer) Update(desired model.Desired, desiredChanged map[model.Frontend]bool, full bool,
	obs model.Observed) []model.Finding {
	obsSame := obs.Version != 0 && obs.Version == c.obsVersion && obs.Datapath == c.mode && c.observed != nil
	touched := map[model.Frontend]bool{}
	switch {
	case obs.Datapath != c.mode || c.desired == nil || full,
		!obsSame && !c.namesChanges(obs) && sameMap(c.observed, obs.Frontends):
		// (The second: a reader changed the frontends in place without
		// naming what changed since the last Update; a diff of the map
		// against itself finds nothing, so compare everything.)
		for _, m := range []map[model.Frontend]model.Verdict{c.desired, c.observed, desired.Frontends, obs.Frontends} {
			for fe := range m {
				touched[fe] = true
			}
		}
	case !obsSame && !c.namesChanges(obs):
		c.diffKeys(desired.Frontends, obs.Frontends, touched)
	case !obsSame: // the reader names what moved
		for fe := range obs.Changed {
			touched[fe] = true
		}
	}
	for fe := range desiredChanged {
		touched[fe] = true
	}
	c.desired, c.observed, c.obsVersion, c.mode = desired.Frontends, obs.Frontends, obs.Version, obs.Datapath
	c.Compared = len(touched)
	for fe := range touched {
		c.compareOne(fe)
	}
	if len(touched) > 0 || c.sorted == nil {
		c.sorted = c.flatten()
	}
	return c.sorted
}

// namesChanges reports whether obs names every frontend that changed since
// the observation of the last Update.
func (c *Comparer) namesChanges(obs model.Observed) bool {
	return obs.Changed != nil && obs.Since == c.obsVersion && c.obsVersion != 0
}

// sameMap reports whether a and b are one map (not equal contents).
func sameMap(a, b map[model.Frontend]model.Verdict) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// diffKeys marks every frontend whose verdict differs between the last and
// the new maps (a cheap pass: no finding is built for unchanged ones).
func (c *Comparer) diffKeys(desired, observed map[model.Frontend]model.Verdict, touched map[model.Frontend]bool) {
	model.MarkDiffering(touched, c.desired, desired, sameContent)
	model.MarkDiffering(touched, c.observed, observed, sameContent)
}

// compareOne recomputes the findings of one frontend.
func (c *Comparer) compareOne(fe model.Frontend) {
	want, wantOK := c.desired[fe]
	got, gotOK := c.observed[fe]
	var fs []model.Finding
	switch {
	case wantOK && want.Uncertain != "":
	case wantOK && !gotOK:
		fs = []model.Finding{missingFrontend(fe, want)}
	case wantOK:
		fs = compareVerdicts(fe, want, got, c.mode)
	case gotOK:
		fs = []model.Finding{staleFrontend(fe, got)}
	}
	if len(fs) == 0 {
		delete(c.found, fe)
		return
	}
	kf := make([]model.Keyed[model.Finding], len(fs))
	for i, f := range fs {
		kf[i] = model.Keyed[model.Finding]{Key: f.Key(), Value: f} // every Update sorts them all again
	}
	c.found[fe] = kf
}

// flatten is every finding, in model.SortFindings order.
func (c *Comparer) flatten() []model.Finding {
	var all []model.Keyed[model.Finding]
	for _, fs := range c.found {
		all = append(all, fs...)
	}
	if out := model.SortedByKey(all); out != nil {
		return out
	}
	return []model.Finding{}
}

// sameContent reports whether two verdicts would yield the same findings:
// same action, service, backends, endpoints and evidence.
func sameContent(a, b model.Verdict) bool {
	if a.Action != b.Action || a.Service != b.Service || a.Uncertain != b.Uncertain ||
		len(a.Backends) != len(b.Backends) || len(a.Endpoints) != len(b.Endpoints) || len(a.Evidence) != len(b.Evidence) {
		return false
	}
	for i := range a.Backends {
		if a.Backends[i] != b.Backends[i] {
			return false
		}
	}
	for i := range a.Endpoints {
		if a.Endpoints[i] != b.Endpoints[i] {
			return false
		}
	}
	for i := range a.Evidence {
		if a.Evidence[i] != b.Evidence[i] {
			return false
		}
	}
	return true
}
