package agent

import (
	"fmt"
	"time"

	"github.com/netdrift/netdrift/internal/watch"
)

// watchHealth says whether the agent's view of the API is current: the
// kubelet renews this node's Lease every ~10 s, so a renewal delivered late,
// or none at all, means the watch lags and mismatches must not be promoted.
type watchHealth struct {
	lastDelivery time.Time   // the latest watch delivery of any kind
	lease        WatchStatus // the Lease part of the status
}

// record notes a watch delivery.
func (h *watchHealth) record(ev watch.Event) {
	if ev.At.After(h.lastDelivery) {
		h.lastDelivery = ev.At
	}
	if ev.Kind != watch.KindLease {
		return
	}
	h.lease.LeaseSeen = true
	h.lease.LastLeaseDelivery = ev.At
	if !ev.LeaseRenew.IsZero() {
		h.lease.LastLeaseRenew = ev.LeaseRenew
		h.lease.LeaseDelay = ev.At.Sub(ev.LeaseRenew)
	}
}

// status judges the watch at now. synced/why are the caches' sync state;
// api says how the requests to the API server fare.
func (h *watchHealth) status(now time.Time, synced bool, why string, limit time.Duration, api APIState) WatchStatus {
	ws := h.lease
	ws.LastDelivery = h.lastDelivery
	ws.Synced, ws.SyncReason = synced, why
	switch {
	case !ws.Synced:
		ws.Healthy, ws.HealthReason = false, ws.SyncReason
	case !ws.LeaseSeen:
		ws.Healthy, ws.HealthReason = true, "no Lease for this node seen: watch currency is proven by other deliveries only"
	case now.Sub(latest(ws.LastLeaseDelivery, ws.LastDelivery)) > limit:
		// Any delivery proves the API server is serving the watch again: after
		// an outage the Lease informer's re-watch may back off for tens of seconds.
		ws.Healthy = false
		ws.HealthReason = fmt.Sprintf("no Lease renewal delivered for %s (limit %s): the API server or the watch lags; mismatches are not promoted",
			now.Sub(ws.LastLeaseDelivery).Round(time.Second), limit)
		if api.Failing {
			ws.HealthReason += fmt.Sprintf("; requests to the API server fail since %s ago (%s)",
				now.Sub(api.FailingSince).Round(time.Second), api.LastError)
		}
	default:
		ws.Healthy, ws.HealthReason = true, "Lease renewals arrive"
	}
	return ws
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// watchStatusLocked is the watch health now; api is how the requests to the
// API server fare (apiState, read once by the caller).
func (a *Agent) watchStatusLocked(now time.Time, api APIState) WatchStatus {
	synced, why := a.cluster.Synced()
	return a.health.status(now, synced, why, a.cfg.WatchUnhealthyAfter, api)
}

// apiState is how the requests to the API server fare (never failing
// without Config.API).
func (a *Agent) apiState() APIState {
	if a.cfg.API == nil {
		return APIState{}
	}
	return a.cfg.API()
}
