package drift

import (
	"math"
	"sort"
	"time"
)

// PreStopWindow is how far back RecommendPreStop looks at removals.
const PreStopWindow = 30 * time.Minute

// RecommendPreStop is the preStop sleep that would have covered this node's
// endpoint removals in the window before now: p99 of T2-T0 (trigger to
// programmed; T2-T1 when the trigger time is unknown), plus a margin of
// 1 s + 20 %: the trigger time is second-granular, the endpoint controller
// batches updates, and other nodes (seen in the dashboard's cluster max) lag
// differently. Rounded up to whole seconds; false when there is no removal
// sample.
func RecommendPreStop(samples []LagSample, now time.Time, window time.Duration) (float64, bool) {
	var ds []time.Duration
	for _, s := range samples {
		if s.Kind != ChangeRemove || now.Sub(s.T2) > window {
			continue
		}
		d, ok := s.NetworkLatency()
		if !ok {
			d = s.NodeLag()
		}
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		return 0, false
	}
	return math.Ceil(Percentile(ds, 0.99).Seconds()*1.2 + 1), true
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 1) of ds; zero
// for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
