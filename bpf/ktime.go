package bpf

import (
	"time"

	"golang.org/x/sys/unix"
)

// KtimeNow reads CLOCK_MONOTONIC in ns, the clock of bpf_ktime_get_ns that
// every program here timestamps with (0 if it cannot be read).
func KtimeNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// KtimeToWall places a bpf_ktime_get_ns reading on the wall clock; ok is
// false when it is in the future or, with maxAge > 0, older than maxAge.
func KtimeToWall(mono uint64, maxAge time.Duration) (time.Time, bool) {
	now := time.Now()
	k := KtimeNow()
	if k == 0 {
		return time.Time{}, false
	}
	age := time.Duration(int64(k) - int64(mono))
	if age < 0 || (maxAge > 0 && age > maxAge) {
		return time.Time{}, false
	}
	return now.Add(-age), true
}
