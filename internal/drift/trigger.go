package drift

import "time"

// TriggerSkew says why a change's trigger time (T0, the control plane's
// clock) was not used: "" when it was.
type TriggerSkew string

const (
	// SkewFuture: T0 is later than the watch's delivery of the change (T1,
	// this node's clock) by more than TriggerFutureTolerance. A change is
	// not delivered before it happened: one of the two clocks is wrong.
	SkewFuture TriggerSkew = "future"
	// SkewPast: T0 is more than MaxTriggerAge before T1: on a skewed clock
	// or a stale annotation, T2-T0 would report a latency nobody had.
	SkewPast TriggerSkew = "past"
)

// TriggerFutureTolerance is how far after T1 a trigger time may lie and
// still be taken (clamped to T1): two synchronized clocks disagree by a
// few milliseconds, and the annotation may be rounded up to the second.
const TriggerFutureTolerance = time.Second

// MaxTriggerAge is the oldest trigger time (before T1) taken as the time
// of the change delivered at T1. kube-proxy's own latency histogram ends
// at five minutes; a change the watch delivers an hour after its trigger
// time is far more likely a skewed clock than an hour-long watch delay.
const MaxTriggerAge = time.Hour

// JudgeTrigger returns the T0 to use for a change delivered at t1 with
// trigger time t0: t0 itself when it is plausible, t1 when t0 lies up to
// TriggerFutureTolerance after t1 (so T2-T0 is never shorter than T2-T1),
// and zero with the reason when t0 cannot be the change's time on this
// node's clock (the sample then has no network latency: unknown, not
// wrong). A zero t0 is returned as is, with no skew.
func JudgeTrigger(t0, t1 time.Time) (time.Time, TriggerSkew) {
	switch {
	case t0.IsZero():
		return t0, ""
	case t0.After(t1.Add(TriggerFutureTolerance)):
		return time.Time{}, SkewFuture
	case t0.After(t1):
		return t1, ""
	case t1.Sub(t0) > MaxTriggerAge:
		return time.Time{}, SkewPast
	}
	return t0, ""
}
