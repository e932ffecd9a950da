package cli

import (
	"math"
	"testing"
	"time"
)

// TestDuration: one format for every duration in the tables, three
// significant digits below a minute, no trailing zero unit.
func TestDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{850 * time.Nanosecond, "850ns"},
		{850 * time.Microsecond, "850µs"},
		{1234567 * time.Nanosecond, "1.23ms"},
		{35 * time.Millisecond, "35ms"},
		{35240 * time.Microsecond, "35.2ms"},
		{400 * time.Millisecond, "400ms"},
		{999700 * time.Microsecond, "1s"},
		{7500 * time.Millisecond, "7.5s"},
		{1234 * time.Millisecond, "1.23s"},
		{12345 * time.Millisecond, "12.3s"},
		{59960 * time.Millisecond, "1m"},
		{123400 * time.Millisecond, "2m3s"},
		{2 * time.Minute, "2m"},
		{time.Hour + 5*time.Minute + 29*time.Second, "1h5m"},
		{3 * time.Hour, "3h"},
		{-35 * time.Millisecond, "-35ms"},
		{math.MinInt64, "-2562047h47m"},
	} {
		if got := duration(c.d); got != c.want {
			t.Errorf("duration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	for v, want := range map[float64]string{0.035: "35ms", 7.5: "7.5s", 0.0004: "400µs", 1.25: "1.25s", math.NaN(): "-", math.Inf(1): "-", 1e12: "-"} {
		if got := seconds(v); got != want {
			t.Errorf("seconds(%v) = %q, want %q", v, got, want)
		}
	}
	if got := preStop(2.6); got != "3s" {
		t.Errorf("preStop(2.6) = %q, want 3s", got)
	}
}

func TestTimestamp(t *testing.T) {
	at := time.Date(2026, 11, 29, 15, 29, 52, 500e6, time.FixedZone("CET", 3600))
	if got := timestamp(at); got != "2026-11-29T14:29:52.500Z" {
		t.Errorf("timestamp = %q", got)
	}
	if got := timestamp(at.Truncate(time.Second)); got != "2026-11-29T14:29:52.000Z" {
		t.Errorf("timestamp = %q", got)
	}
	if got, want := clock(at), "14:29:52.500"; got != want {
		t.Errorf("clock = %q, want %q", got, want)
	}
	if timestamp(time.Time{}) != "-" || clock(time.Time{}) != "-" {
		t.Error("zero time must print -")
	}
}
