package agent

import (
	"fmt"
	"time"
)

// The codes of a view that is not current: why the agent's answers rest on
// no current view of the cluster or of the datapath. A bounded set: they
// are metric label values (ViewCodes).
const (
	ViewStarting       = "starting"             // no datapath read finished yet
	ViewAPIFailing     = "api_failing"          // list/watch requests to the API server fail
	ViewNotSynced      = "caches_not_synced"    // an informer cache has not synced
	ViewWatchUnhealthy = "watch_unhealthy"      // Lease renewals stopped arriving
	ViewNoDatapath     = "no_datapath"          // no kube-proxy state found to read
	ViewReadFailed     = "datapath_read_failed" // the last datapath read failed
	ViewBehind         = "datapath_behind"      // the datapath view trails the kernel's commits longer than stale-after
)

// ViewCodes are every code a View that is not current may carry.
var ViewCodes = []string{ViewStarting, ViewAPIFailing, ViewNotSynced, ViewWatchUnhealthy, ViewNoDatapath, ViewReadFailed, ViewBehind}

// View says whether the agent has a current view of the cluster (caches
// synced, watch healthy, API requests succeeding) and of the datapath (the
// last read succeeded and found kube-proxy's state). Until it has, every
// answer says so: no finding, no "not known" is a statement about the node.
type View struct {
	Current   bool
	Code      string    // one of ViewCodes; "" when current
	Reason    string    // a sentence; "" when current
	Since     time.Time // when the view became (not) current
	LastError string    // the error behind it, when there is one
	// Behind is how far the datapath view trails the kernel's nf_tables
	// commits, current or not (zero without change events).
	Behind Behind
}

// APIState is how the agent's list and watch requests to the API server
// fare (APIHealth): failing from the first failure after a success until
// the next success.
type APIState struct {
	Failing      bool
	FailingSince time.Time
	Failures     uint64 // failed requests since FailingSince
	LastError    string
	LastErrorAt  time.Time
}

// readState is what the datapath reads found, for the view.
type readState struct {
	done         bool      // a read finished
	ok           bool      // the last read succeeded and found kube-proxy's state
	failingSince time.Time // first failed read since the last good one
	err          string    // the last read's error
	none         string    // why no kube-proxy state was found ("" when found)
}

// record notes a finished read at now: err is its error ("" when it
// succeeded), none why it found no kube-proxy state ("" when it did).
func (r *readState) record(now time.Time, err, none string) {
	ok := err == "" && none == ""
	if !ok && (r.ok || !r.done) {
		r.failingSince = now
	}
	r.done, r.ok, r.err, r.none = true, ok, err, none
}

// viewInput is what a view is judged from.
type viewInput struct {
	watch WatchStatus
	api   APIState
	read  readState
	// behind: how far the published datapath view trails the kernel;
	// longer than behindLimit at now, the view is not current.
	behind      Behind
	behindLimit time.Duration
	now         time.Time
}

// judgeView is the view the inputs give, with when its cause began (zero
// when unknown). The first cause in the order below wins: a failing API
// explains the caches that do not sync and the Lease renewals that stop.
func judgeView(in viewInput) (View, time.Time) {
	api, read := in.api, in.read
	switch {
	case api.Failing:
		return View{Code: ViewAPIFailing, LastError: api.LastError,
			Reason: fmt.Sprintf("list/watch requests to the API server fail (%d failed since %s): the watch cache is not kept current",
				api.Failures, api.FailingSince.UTC().Format(time.RFC3339))}, api.FailingSince
	case !in.watch.Synced:
		return View{Code: ViewNotSynced, Reason: in.watch.SyncReason, LastError: api.LastError}, time.Time{}
	case !in.watch.Healthy:
		return View{Code: ViewWatchUnhealthy, Reason: in.watch.HealthReason, LastError: api.LastError}, time.Time{}
	case !read.done:
		return View{Code: ViewStarting, Reason: "no datapath read has finished yet"}, time.Time{}
	case read.none != "":
		return View{Code: ViewNoDatapath, Reason: "no kube-proxy datapath state found (" + read.none + "): service findings cannot be reported"},
			read.failingSince
	case !read.ok:
		return View{Code: ViewReadFailed, Reason: "the last datapath read failed: the observed state is not current",
			LastError: read.err}, read.failingSince
	case in.behind.Commits > 0 && in.now.Sub(in.behind.Since) > in.behindLimit:
		return View{Code: ViewBehind, Reason: fmt.Sprintf(
			"the datapath view trails the kernel: %d nf_tables commits since %s not read yet, longer than stale-after (%s)",
			in.behind.Commits, in.behind.Since.UTC().Format(time.RFC3339), in.behindLimit)}, in.behind.Since.Add(in.behindLimit)
	}
	return View{Current: true}, time.Time{}
}

// viewTracker keeps the view and since when it holds.
type viewTracker struct{ v View }

func newViewTracker(start time.Time) viewTracker {
	return viewTracker{v: View{Code: ViewStarting, Reason: "starting", Since: start}}
}

// update judges the view at now. Since moves only when the view turns
// current or stops being so, to when its cause began when known (the first
// failed request or read), else to now. It reports whether Current changed.
func (t *viewTracker) update(now time.Time, in viewInput) (View, bool) {
	in.now = now
	v, causeAt := judgeView(in)
	v.Behind = in.behind
	changed := v.Current != t.v.Current
	switch {
	case !changed:
		v.Since = t.v.Since
	case !v.Current && !causeAt.IsZero() && causeAt.After(t.v.Since) && causeAt.Before(now):
		v.Since = causeAt
	default:
		v.Since = now
	}
	if v.LastError != "" && !in.api.LastErrorAt.IsZero() && in.api.LastErrorAt.Before(v.Since) && v.Code != ViewReadFailed &&
		v.Code != ViewAPIFailing {
		v.LastError = "" // an API error from before this view: not what is behind it
	}
	t.v = v
	return v, changed
}
