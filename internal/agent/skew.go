package agent

import (
	"fmt"
	"time"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
)

// TriggerSkewCounts counts the recorded changes whose EndpointSlice trigger
// time (T0) was ignored as skewed (drift.JudgeTrigger): their lag samples
// have no network latency (T2-T0). Last describes the newest.
type TriggerSkewCounts struct {
	Future, Past uint64
	Last         string
}

// triggerSkew keeps TriggerSkewCounts; the change tracker's, under the
// agent's lock.
type triggerSkew struct{ counts TriggerSkewCounts }

func (s *triggerSkew) count(svc model.ServiceName, why drift.TriggerSkew, t0, t1 time.Time) {
	switch why {
	case drift.SkewFuture:
		s.counts.Future++
	case drift.SkewPast:
		s.counts.Past++
	default:
		return
	}
	s.counts.Last = fmt.Sprintf("%s: trigger time %s is %s the watch's delivery at %s",
		svc, t0.UTC().Format(time.RFC3339Nano), skewWords(why, t1.Sub(t0)), t1.UTC().Format(time.RFC3339Nano))
}

func skewWords(why drift.TriggerSkew, d time.Duration) string {
	if why == drift.SkewFuture {
		return (-d).Round(time.Millisecond).String() + " after"
	}
	return d.Round(time.Millisecond).String() + " before"
}

// note is the status note on skewed trigger times ("" when none).
func (c TriggerSkewCounts) note() string {
	if c.Future+c.Past == 0 {
		return ""
	}
	return fmt.Sprintf("EndpointSlice trigger times ignored as skewed (control-plane clock or annotation): %d in the future, %d more than %s in the past; "+
		"those changes' lag samples have no network latency (T2-T0); last: %s", c.Future, c.Past, drift.MaxTriggerAge, c.Last)
}
