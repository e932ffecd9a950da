package drift

import (
	"testing"
	"time"
)

func TestJudgeTrigger(t *testing.T) {
	t1 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		t0     time.Time
		want   time.Time
		reason TriggerSkew
	}{
		{"unknown", time.Time{}, time.Time{}, ""},
		{"before delivery", t1.Add(-800 * time.Millisecond), t1.Add(-800 * time.Millisecond), ""},
		{"at delivery", t1, t1, ""},
		{"rounded up past delivery: clamped", t1.Add(400 * time.Millisecond), t1, ""},
		{"at the tolerance: clamped", t1.Add(TriggerFutureTolerance), t1, ""},
		{"future", t1.Add(TriggerFutureTolerance + time.Millisecond), time.Time{}, SkewFuture},
		{"far future", t1.Add(24 * time.Hour), time.Time{}, SkewFuture},
		{"minutes old", t1.Add(-5 * time.Minute), t1.Add(-5 * time.Minute), ""},
		{"at the age bound", t1.Add(-MaxTriggerAge), t1.Add(-MaxTriggerAge), ""},
		{"far past", t1.Add(-MaxTriggerAge - time.Second), time.Time{}, SkewPast},
	} {
		got, reason := JudgeTrigger(c.t0, t1)
		if !got.Equal(c.want) || reason != c.reason {
			t.Errorf("%s: JudgeTrigger = %v, %q; want %v, %q", c.name, got, reason, c.want, c.reason)
		}
	}
}
