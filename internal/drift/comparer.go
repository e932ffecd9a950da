package drift

import (
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

// Changes is what the caller knows of what changed since the last Update.
type Changes struct {
	// Desired names the frontends whose desired verdict may have changed.
	// The desired map may be the same one as last time, updated in place:
	// a diff of the map against itself finds nothing, so Desired must name
	// every frontend that changed in it.
	Desired map[model.Frontend]bool
	// Full compares every frontend again (the slow full audit, the safety
	// net for anything the incremental path missed).
	Full bool
	// ObservedInPlace says the reader may have changed the frontends of the
	// last observation in place since the last Update (a datapath.Freezer
	// reader shares them with its cache, and applied a change event). A
	// diff against the last observation cannot see such a change, so unless
	// the reader names what changed (Observed.Since and Changed), every
	// frontend is compared again.
	ObservedInPlace bool
}

// Update returns the findings for desired and observed. An observed state
// with the same non-zero Version as the last one is taken as unchanged; one
// that names its changes since the last one (Since, Changed) is compared at
// those; any other is diffed against the last one, unless the last one was
// changed in place (Changes.ObservedInPlace), which compares everything.
func (c *Comparer) Update(desired model.Desired, obs model.Observed, ch Changes) []model.Finding {
	obsSame := obs.Version != 0 && obs.Version == c.obsVersion && obs.Datapath == c.mode && c.observed != nil
	touched := map[model.Frontend]bool{}
	switch {
	case obs.Datapath != c.mode || c.desired == nil || ch.Full,
		!obsSame && !c.namesChanges(obs) && ch.ObservedInPlace:
		for _, m := range []map[model.Frontend]model.Verdict{c.desired, c.observed, desired.Frontends, obs.Frontends} {
			for fe := range m {
				touched[fe] = true
			}
		}
		// And every frontend holding a finding: one whose frontend left
		// the last observation in place (a change event) and is in
		// neither new map is in none of the four, and its finding
		// would stay for good, through every full audit.
		for fe := range c.found {
			touched[fe] = true
		}
	case !obsSame && !c.namesChanges(obs):
		c.diffKeys(desired.Frontends, obs.Frontends, touched)
	case !obsSame: // the reader names what moved
		for fe := range obs.Changed {
			touched[fe] = true
		}
	}
	for fe := range ch.Desired {
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

// diffKeys marks every frontend whose verdict differs between the last and
// the new maps (a cheap pass: no finding is built for unchanged ones).
func (c *Comparer) diffKeys(desired, observed map[model.Frontend]model.Verdict, touched map[model.Frontend]bool) {
	model.MarkDiffering(touched, c.desired, desired)
	model.MarkDiffering(touched, c.observed, observed)
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
